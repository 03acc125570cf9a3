package opsapi

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// The error kinds every backend maps to. Callers test with errors.Is.
var (
	ErrNotExist    = errors.New("no such file or directory")
	ErrExist       = errors.New("already exists")
	ErrPermission  = errors.New("permission denied")
	ErrIsDir       = errors.New("is a directory")
	ErrNotDir      = errors.New("not a directory")
	ErrInvalid     = errors.New("invalid argument")
	ErrTimeout     = errors.New("timed out")
	ErrCanceled    = errors.New("canceled")
	ErrDenied      = errors.New("denied by policy")
	ErrTooLarge    = errors.New("too large")
	ErrUnavailable = errors.New("unavailable")
)

// Kinds lists every error kind, in a stable order.
var Kinds = []error{
	ErrNotExist, ErrExist, ErrPermission, ErrIsDir, ErrNotDir, ErrInvalid,
	ErrTimeout, ErrCanceled, ErrDenied, ErrTooLarge, ErrUnavailable,
}

// Error describes a failed operation: what was attempted, on which path,
// which kind of failure it was, and the underlying cause.
type Error struct {
	Op   string // operation, e.g. "read" or "local.WriteFile"
	Path string // path as the caller gave it, if any
	Kind error  // one of the Err* kinds, or nil when unknown
	Err  error  // underlying error, may be nil
}

// E builds an *Error. When kind is nil it is derived from err with Classify.
func E(op, path string, kind, err error) error {
	if kind == nil {
		kind = Classify(err)
	}
	return &Error{Op: op, Path: path, Kind: kind, Err: err}
}

func (e *Error) Error() string {
	msg := e.Op
	if e.Path != "" {
		msg += " " + e.Path
	}
	switch {
	case e.Err != nil:
		msg += ": " + e.Err.Error()
	case e.Kind != nil:
		msg += ": " + e.Kind.Error()
	}
	return msg
}

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// KindOf returns the kind of err (one of Kinds), or nil when err matches none.
func KindOf(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range Kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return Classify(err)
}

// Classify maps operating-system, io/fs and context errors to a kind. It
// returns nil for errors it does not recognise.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range Kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT:
			return ErrNotExist
		case syscall.EEXIST, syscall.ENOTEMPTY:
			return ErrExist
		case syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ELOOP, syscall.EXDEV:
			return ErrPermission
		case syscall.EISDIR:
			return ErrIsDir
		case syscall.ENOTDIR:
			return ErrNotDir
		case syscall.EINVAL, syscall.ENAMETOOLONG:
			return ErrInvalid
		case syscall.EFBIG, syscall.ENOSPC, syscall.EDQUOT:
			return ErrTooLarge
		case syscall.ETIMEDOUT:
			return ErrTimeout
		case syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.EPIPE, syscall.EIO:
			return ErrUnavailable
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotExist
	case errors.Is(err, fs.ErrExist):
		return ErrExist
	case errors.Is(err, fs.ErrPermission):
		return ErrPermission
	case errors.Is(err, fs.ErrInvalid):
		return ErrInvalid
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	}
	return nil
}

// Code returns the stable, lower-case name of err's kind as used on the
// wire ("not_exist", "permission", ...), or "internal" when it has none.
func Code(err error) string {
	switch KindOf(err) {
	case ErrNotExist:
		return "not_exist"
	case ErrExist:
		return "exists"
	case ErrPermission:
		return "permission"
	case ErrIsDir:
		return "is_dir"
	case ErrNotDir:
		return "not_dir"
	case ErrInvalid:
		return "invalid"
	case ErrTimeout:
		return "timeout"
	case ErrCanceled:
		return "canceled"
	case ErrDenied:
		return "denied"
	case ErrTooLarge:
		return "too_large"
	case ErrUnavailable:
		return "unavailable"
	}
	return "internal"
}

// KindForCode is the inverse of Code; it returns nil for "internal" and for
// codes it does not know.
func KindForCode(code string) error {
	for _, k := range Kinds {
		if Code(k) == code {
			return k
		}
	}
	return nil
}
