package opsapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{syscall.ENOENT, ErrNotExist},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, ErrNotExist},
		{syscall.EACCES, ErrPermission},
		{syscall.EROFS, ErrPermission},
		{syscall.EISDIR, ErrIsDir},
		{syscall.ENOTDIR, ErrNotDir},
		{syscall.EEXIST, ErrExist},
		{syscall.ENOSPC, ErrTooLarge},
		{os.ErrNotExist, ErrNotExist},
		{fs.ErrPermission, ErrPermission},
		{context.DeadlineExceeded, ErrTimeout},
		{context.Canceled, ErrCanceled},
		{fmt.Errorf("wrapped: %w", ErrDenied), ErrDenied},
		{errors.New("something else"), nil},
		{nil, nil},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestErrorIsKindAndCause(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/w/a", Err: syscall.ENOENT}
	err := E("local.Open", "a", nil, cause)
	if !errors.Is(err, ErrNotExist) {
		t.Fatalf("%v is not ErrNotExist", err)
	}
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("%v lost its cause", err)
	}
	if got, want := err.Error(), "local.Open a: open /w/a: no such file or directory"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if got := E("x", "", ErrInvalid, nil).Error(); got != "x: invalid argument" {
		t.Fatalf("kind-only message = %q", got)
	}
}

func TestCodeRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds {
		code := Code(fmt.Errorf("ctx: %w", k))
		if code == "internal" || seen[code] {
			t.Fatalf("kind %v has code %q (duplicate or missing)", k, code)
		}
		seen[code] = true
		if KindForCode(code) != k {
			t.Fatalf("KindForCode(%q) = %v, want %v", code, KindForCode(code), k)
		}
	}
	if Code(errors.New("boom")) != "internal" || KindForCode("internal") != nil {
		t.Fatal("unknown errors must be internal and map back to no kind")
	}
}

func TestResolveAndWithin(t *testing.T) {
	cases := []struct{ cwd, p, want string }{
		{"/w", "a/b", "/w/a/b"},
		{"/w", "../etc/passwd", "/etc/passwd"},
		{"/w", "/abs/../x", "/x"},
		{"/w", ".", "/w"},
	}
	for _, c := range cases {
		if got := Resolve(c.cwd, c.p); got != c.want {
			t.Errorf("Resolve(%q, %q) = %q, want %q", c.cwd, c.p, got, c.want)
		}
	}
	if !Within("/w", "/w") || !Within("/w", "/w/x") || Within("/w", "/wx") || Within("/w", "/") || !Within("/", "/etc") {
		t.Fatal("Within is wrong")
	}
}
