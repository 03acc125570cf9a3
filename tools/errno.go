package tools

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/wsbroker/wsbroker/opsapi"
)

// errnoName returns the Node.js error code ("ENOENT", "EACCES", ...) that
// corresponds to err, or "" when there is none. pi shows these codes (edit:
// "Error code: ENOENT") because Node's fs errors carry them.
func errnoName(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n := sysErrnoName(errno); n != "" {
			return n
		}
	}
	switch opsapi.KindOf(err) {
	case opsapi.ErrNotExist:
		return "ENOENT"
	case opsapi.ErrPermission:
		return "EACCES"
	case opsapi.ErrIsDir:
		return "EISDIR"
	case opsapi.ErrNotDir:
		return "ENOTDIR"
	case opsapi.ErrExist:
		return "EEXIST"
	case opsapi.ErrInvalid:
		return "EINVAL"
	case opsapi.ErrTooLarge:
		return "EFBIG"
	case opsapi.ErrTimeout:
		return "ETIMEDOUT"
	}
	return ""
}

func sysErrnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EISDIR:
		return "EISDIR"
	case syscall.ENOTDIR:
		return "ENOTDIR"
	case syscall.EEXIST:
		return "EEXIST"
	case syscall.ENOTEMPTY:
		return "ENOTEMPTY"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.ENAMETOOLONG:
		return "ENAMETOOLONG"
	case syscall.ELOOP:
		return "ELOOP"
	case syscall.EROFS:
		return "EROFS"
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EFBIG:
		return "EFBIG"
	case syscall.EMFILE:
		return "EMFILE"
	case syscall.ETIMEDOUT:
		return "ETIMEDOUT"
	}
	return ""
}

// errnoText is libuv's description of each code, as Node prints it.
var errnoText = map[string]string{
	"ENOENT":       "no such file or directory",
	"EACCES":       "permission denied",
	"EPERM":        "operation not permitted",
	"EISDIR":       "illegal operation on a directory",
	"ENOTDIR":      "not a directory",
	"EEXIST":       "file already exists",
	"ENOTEMPTY":    "directory not empty",
	"EINVAL":       "invalid argument",
	"ENAMETOOLONG": "name too long",
	"ELOOP":        "too many symbolic links encountered",
	"EROFS":        "read-only file system",
	"ENOSPC":       "no space left on device",
	"EFBIG":        "file too large",
	"EMFILE":       "too many open files",
	"ETIMEDOUT":    "connection timed out",
}

// nodeError is an error whose text is what Node's fs would have thrown, e.g.
// "ENOENT: no such file or directory, access '/w/a.txt'", while errors.Is
// still reaches the backend's error.
type nodeError struct {
	msg string
	err error
}

func (e *nodeError) Error() string { return e.msg }
func (e *nodeError) Unwrap() error { return e.err }

// nodeErr renders err as Node would for syscall (e.g. "open") on path;
// path "" omits the ", '<path>'" part (Node's EISDIR on read has none).
// An error with no known code is returned unchanged.
func nodeErr(err error, syscallName, path string) error {
	code := errnoName(err)
	text, ok := errnoText[code]
	if !ok {
		return err
	}
	msg := fmt.Sprintf("%s: %s, %s", code, text, syscallName)
	if path != "" {
		msg += fmt.Sprintf(" '%s'", path)
	}
	return &nodeError{msg: msg, err: err}
}

// engineMessage returns the most useful message of a backend error: the
// cause carried by an *opsapi.Error (e.g. ripgrep's own regex error) rather
// than its "op path:" prefix.
func engineMessage(err error) string {
	var oe *opsapi.Error
	if errors.As(err, &oe) {
		if oe.Err != nil {
			return oe.Err.Error()
		}
		if oe.Kind != nil {
			return oe.Kind.Error()
		}
	}
	return err.Error()
}
