package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// errnoErr returns a backend-style error of the kind Node calls code.
func errnoErr(code string) error {
	kinds := map[string]error{"ENOENT": opsapi.ErrNotExist, "EACCES": opsapi.ErrPermission, "EISDIR": opsapi.ErrIsDir}
	return opsapi.E("fake.op", "/w/x", kinds[code], nil)
}

func TestErrnoName(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{opsapi.E("op", "/p", opsapi.ErrNotExist, nil), "ENOENT"},
		{fmt.Errorf("wrapped: %w", opsapi.ErrPermission), "EACCES"},
		{opsapi.E("op", "/p", nil, syscall.EPERM), "EPERM"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, "ENOENT"},
		{opsapi.ErrIsDir, "EISDIR"},
		{opsapi.ErrNotDir, "ENOTDIR"},
		{opsapi.ErrExist, "EEXIST"},
		{opsapi.ErrDenied, ""},
		{opsapi.ErrUnavailable, ""},
		{errors.New("disk offline"), ""},
	}
	for _, c := range cases {
		if got := errnoName(c.err); got != c.want {
			t.Errorf("errnoName(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestNodeErr(t *testing.T) {
	base := opsapi.E("local.Open", "/w/a", opsapi.ErrNotExist, nil)
	err := nodeErr(base, "open", "/w/a")
	if err.Error() != "ENOENT: no such file or directory, open '/w/a'" {
		t.Errorf("got %q", err)
	}
	if !errors.Is(err, opsapi.ErrNotExist) {
		t.Error("the kind is lost")
	}
	if got := nodeErr(opsapi.ErrIsDir, "read", "").Error(); got != "EISDIR: illegal operation on a directory, read" {
		t.Errorf("got %q", got)
	}
	plain := errors.New("disk offline")
	if nodeErr(plain, "open", "/x") != plain {
		t.Error("an error without a code must pass unchanged")
	}
}
