package sftpops

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Symlink makes p a symbolic link to target, stored as given. An existing
// p is ErrExist, a missing parent ErrNotExist, a file among the parents
// ErrNotDir. OpenSSH reports EEXIST as a bare "failure", so a failed
// request is explained by a look at p. It is not retried on a fresh
// client: the lost request may have made the link.
func (f *FS) Symlink(ctx context.Context, target, p string) error {
	op := f.op("Symlink")
	abs, err := f.Abs("Symlink", p)
	if err != nil {
		return err
	}
	if strings.IndexByte(target, 0) >= 0 {
		return opsapi.E(op, p, opsapi.ErrInvalid, errors.New("NUL byte in link target"))
	}
	if target == "" {
		return opsapi.E(op, p, opsapi.ErrInvalid, errors.New("empty link target"))
	}
	err = f.with(ctx, false, func(c *sftp.Client) error {
		err := c.Symlink(target, abs)
		if err == nil || Lost(err) {
			return err
		}
		if _, lerr := c.Lstat(abs); lerr == nil {
			return opsapi.E(op, p, opsapi.ErrExist, err)
		}
		if perr := f.parentErr(c, abs, err); perr != err {
			return opsapi.E(op, p, opsapi.ErrNotDir, err)
		}
		return err
	})
	return MapErr(op, p, err)
}

// Readlink returns the target of the link at p as stored; p itself is
// not followed. A p that is not a link is ErrInvalid (servers disagree on
// the status readlink's EINVAL gets, so p is looked at), a missing one
// ErrNotExist.
func (f *FS) Readlink(ctx context.Context, p string) (string, error) {
	op := f.op("Readlink")
	abs, err := f.Abs("Readlink", p)
	if err != nil {
		return "", err
	}
	target, err := withValue(ctx, f, true, func(c *sftp.Client) (string, error) {
		target, err := c.ReadLink(abs)
		if err == nil || Lost(err) {
			return target, err
		}
		if fi, lerr := c.Lstat(abs); lerr == nil && !isLink(fi) {
			return "", opsapi.E(op, p, opsapi.ErrInvalid, errors.New("not a symbolic link"))
		}
		return "", err
	}, nil)
	if err != nil {
		return "", MapErr(op, p, err)
	}
	return target, nil
}

// Chmod sets p's permission bits (mode & 0o777), following a link (SFTP's
// setstat does). A missing p is ErrNotExist.
func (f *FS) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	op := f.op("Chmod")
	abs, err := f.Abs("Chmod", p)
	if err != nil {
		return err
	}
	err = f.with(ctx, true, func(c *sftp.Client) error {
		return c.Chmod(abs, mode&fs.ModePerm)
	})
	return MapErr(op, p, err)
}

var _ opsapi.TreeOperations = (*FS)(nil)
