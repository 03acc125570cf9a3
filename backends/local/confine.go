package local

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/wsbroker/wsbroker/opsapi"
)

// maxSymlinks bounds link hops in one resolution, as the kernel's
// MAXSYMLINKS does.
const maxSymlinks = 40

// errEscape is the cause of every refusal to leave the root.
var errEscape = errors.New("path is outside the workspace root")

// rel confines p: it resolves p against the root lexically (opsapi.Resolve)
// and returns it relative to the root ("." for the root itself). A path
// outside the root is ErrPermission, a NUL ErrInvalid (it would otherwise
// cut the name short in the kernel).
func (w *Workspace) rel(op, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", opsapi.E(op, p, opsapi.ErrInvalid, errors.New("NUL byte in path"))
	}
	if w.isDestroyed() {
		return "", opsapi.E(op, p, opsapi.ErrNotExist, errors.New("workspace destroyed"))
	}
	if w.disk > 0 && w.b.closed.Load() {
		// Close unmounted its filesystem: the directory is empty and on
		// the state directory's filesystem.
		return "", opsapi.E(op, p, opsapi.ErrUnavailable, errors.New("backend closed: the workspace's filesystem is unmounted"))
	}
	abs := opsapi.Resolve(w.root, p)
	if !opsapi.Within(w.root, abs) {
		return "", opsapi.E(op, p, opsapi.ErrPermission, errEscape)
	}
	if abs == w.root {
		return ".", nil
	}
	return abs[len(w.root)+1:], nil
}

// resolve returns the canonical form of rel (relative to the root, "."
// for the root): every symbolic link is followed, one component at a time
// through the os.Root, as long as it stays inside the root. A link whose
// target is absolute is followed when the target lies inside the root
// (os.Root alone refuses every absolute link). With followLast false the
// last component is not followed; with missingOK a missing last component
// is no error. A link out of the root is errEscape.
//
// The answer can go stale if the tree changes, but every access that
// uses it goes through the os.Root again, so a swapped link can redirect
// an operation only to another place inside the root.
func (w *Workspace) resolve(rel string, followLast, missingOK bool) (string, error) {
	todo := splitPath(rel)
	var done []string
	hops := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", errEscape
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, name)...)
		last := len(todo) == 0
		fi, err := w.fsroot.Lstat(cur)
		if err != nil {
			if last && missingOK && errors.Is(err, fs.ErrNotExist) {
				return cur, nil
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 && (!last || followLast) {
			if hops++; hops > maxSymlinks {
				return "", &os.PathError{Op: "resolve", Path: rel, Err: syscall.ELOOP}
			}
			target, err := w.fsroot.Readlink(cur)
			if err != nil {
				return "", err
			}
			if path.IsAbs(target) {
				target = path.Clean(target)
				if !opsapi.Within(w.root, target) {
					return "", errEscape
				}
				done = nil
				target = strings.TrimPrefix(strings.TrimPrefix(target, w.root), "/")
			}
			todo = append(splitPath(target), todo...)
			continue
		}
		if !last && !fi.IsDir() {
			return "", &os.PathError{Op: "resolve", Path: cur, Err: syscall.ENOTDIR}
		}
		done = append(done, name)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

func splitPath(p string) []string {
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// mapErr wraps err for op on the caller's path p with its opsapi kind.
// os.Root's refusals to leave the root, and ours, are ErrPermission.
func mapErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var oe *opsapi.Error
	if errors.As(err, &oe) {
		return err
	}
	if isEscape(err) {
		return opsapi.E(op, p, opsapi.ErrPermission, err)
	}
	return opsapi.E(op, p, nil, err)
}

// isEscape recognises a refusal to leave the root: ours, or os.Root's
// (which has no exported sentinel; it is a *PathError whose cause is not an
// errno and reads "path escapes from parent").
func isEscape(err error) bool {
	if errors.Is(err, errEscape) {
		return true
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		var errno syscall.Errno
		if !errors.As(pe.Err, &errno) && strings.Contains(pe.Err.Error(), "escapes") {
			return true
		}
	}
	return false
}
