package sftpserver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"github.com/wsbroker/wsbroker/remote/sftpext"
)

// inline returns the content a ReadSmall reply carried, if any.
func inline(t *testing.T, fi os.FileInfo) (string, bool) {
	t.Helper()
	st, ok := fi.Sys().(*sftp.FileStat)
	if !ok {
		t.Fatalf("stat's Sys() is %T", fi.Sys())
	}
	for _, e := range st.Extended {
		if e.ExtType == sftpext.ReadSmall {
			return e.ExtData, true
		}
	}
	return "", false
}

func TestReadSmall(t *testing.T) {
	c, _ := start(t)
	if v, ok := c.HasExtension(sftpext.ReadSmall); !ok || v != "1" {
		t.Fatalf("VERSION does not advertise %s (got %q)", sftpext.ReadSmall, v)
	}
	dir := t.TempDir()
	put := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	small = append(small, 0, 0xff, '\n') // binary survives
	p := put("small", small, 0o640|os.ModeSetgid)
	mtime := time.Unix(1_700_000_000, 0)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}

	t.Run("content and attributes", func(t *testing.T) {
		fi, err := c.Stat(sftpext.ReadSmallPath(p))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := inline(t, fi)
		if !ok || got != string(small) {
			t.Fatalf("inline content: %d bytes (present %v), want %d", len(got), ok, len(small))
		}
		want, err := c.Stat(p) // pkg/sftp's own answer
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != want.Size() || fi.Mode() != want.Mode() || !fi.ModTime().Equal(want.ModTime()) {
			t.Fatalf("attributes %v %v %v, plain stat says %v %v %v",
				fi.Size(), fi.Mode(), fi.ModTime(), want.Size(), want.Mode(), want.ModTime())
		}
		st, wst := fi.Sys().(*sftp.FileStat), want.Sys().(*sftp.FileStat)
		if st.UID != wst.UID || st.GID != wst.GID || st.Atime != wst.Atime {
			t.Fatalf("owner %d:%d atime %d, plain stat says %d:%d %d", st.UID, st.GID, st.Atime, wst.UID, wst.GID, wst.Atime)
		}
		if _, ok := inline(t, want); ok {
			t.Fatal("a plain stat carried content")
		}
	})

	t.Run("through a symbolic link", func(t *testing.T) {
		link := filepath.Join(dir, "link")
		if err := os.Symlink("small", link); err != nil {
			t.Fatal(err)
		}
		fi, err := c.Stat(sftpext.ReadSmallPath(link))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := inline(t, fi); !ok || got != string(small) {
			t.Fatalf("inline through a link: %d bytes (present %v)", len(got), ok)
		}
	})

	t.Run("empty file", func(t *testing.T) {
		fi, err := c.Stat(sftpext.ReadSmallPath(put("empty", nil, 0o644)))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := inline(t, fi); !ok || got != "" || fi.Size() != 0 {
			t.Fatalf("empty file: %q (present %v), size %d", got, ok, fi.Size())
		}
	})

	// Everything else is answered as a plain stat: attributes without
	// content, or the stat's error.
	plain := func(t *testing.T, p string) os.FileInfo {
		t.Helper()
		fi, err := c.Stat(sftpext.ReadSmallPath(p))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := inline(t, fi); ok {
			t.Fatalf("%s: content inlined", p)
		}
		return fi
	}
	t.Run("too large", func(t *testing.T) {
		fi := plain(t, put("large", make([]byte, sftpext.MaxReadSmall+1), 0o644))
		if fi.Size() != sftpext.MaxReadSmall+1 {
			t.Fatalf("size %d", fi.Size())
		}
	})
	t.Run("directory", func(t *testing.T) {
		if fi := plain(t, dir); !fi.IsDir() {
			t.Fatalf("mode %v", fi.Mode())
		}
	})
	t.Run("fifo is not opened", func(t *testing.T) {
		fifo := filepath.Join(dir, "fifo")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		if fi := plain(t, fifo); fi.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("mode %v", fi.Mode())
		}
	})
	t.Run("pseudo-file", func(t *testing.T) {
		// Size 0 with content on read: read the usual way.
		if fi := plain(t, "/proc/self/status"); fi.Size() != 0 {
			t.Skipf("/proc/self/status has size %d here", fi.Size())
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := c.Stat(sftpext.ReadSmallPath(filepath.Join(dir, "missing")))
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("error = %v, want not exist", err)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads any file")
		}
		plain(t, put("secret", []byte("x"), 0o200))
	})
	t.Run("NUL elsewhere is no request", func(t *testing.T) {
		_, err := c.Stat(p + "\x00other")
		if err == nil || strings.Contains(err.Error(), sftpext.ReadSmall) {
			t.Fatalf("error = %v, want the stat's own failure", err)
		}
	})
}
