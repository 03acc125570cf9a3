package local

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Symlink makes p a symbolic link to target, stored as given: a target
// out of the root is no escape, since every operation that follows the
// link resolves it inside the root again. The parents of p are followed
// inside the root; p itself is not. An existing p is ErrExist, a missing
// parent ErrNotExist. In a sandboxed workspace the link is the sandbox
// user's, as if its command had made it.
func (w *Workspace) Symlink(ctx context.Context, target, p string) error {
	const op = "local.Symlink"
	rel, err := w.rel(op, p)
	if err != nil {
		return err
	}
	if strings.IndexByte(target, 0) >= 0 {
		return opsapi.E(op, p, opsapi.ErrInvalid, errors.New("NUL byte in link target"))
	}
	if target == "" {
		return opsapi.E(op, p, opsapi.ErrInvalid, errors.New("empty link target"))
	}
	lcanon, err := w.resolve(rel, false, true)
	if err != nil {
		return mapErr(op, p, err)
	}
	if lcanon == "." {
		return opsapi.E(op, p, opsapi.ErrExist, errors.New("the workspace root"))
	}
	if err := w.fsroot.Symlink(target, lcanon); err != nil {
		return mapErr(op, p, err)
	}
	if w.uid >= 0 {
		if err := w.fsroot.Lchown(lcanon, w.uid, w.uid); err != nil {
			_ = w.fsroot.Remove(lcanon)
			return mapErr(op, p, err)
		}
	}
	return nil
}

// Readlink returns the target of the link at p as stored. The parents of
// p are followed inside the root; p itself is not. A p that is not a link
// is ErrInvalid, a missing one ErrNotExist.
func (w *Workspace) Readlink(ctx context.Context, p string) (string, error) {
	const op = "local.Readlink"
	rel, err := w.rel(op, p)
	if err != nil {
		return "", err
	}
	lcanon, err := w.resolve(rel, false, false)
	if err != nil {
		return "", mapErr(op, p, err)
	}
	target, err := w.fsroot.Readlink(lcanon)
	if err != nil {
		return "", mapErr(op, p, err)
	}
	return target, nil
}

// Chmod sets p's permission bits (mode & 0o777), following links inside
// the root; a link out of the root is ErrPermission, a missing p
// ErrNotExist.
func (w *Workspace) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	const op = "local.Chmod"
	rel, err := w.rel(op, p)
	if err != nil {
		return err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return mapErr(op, p, err)
	}
	return mapErr(op, p, w.fsroot.Chmod(canon, mode&fs.ModePerm))
}

var _ opsapi.TreeOperations = (*Workspace)(nil)
