package sftpserver_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/remote/sftpserver"
)

func pipeSize(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ferr error
	if err := rc.Control(func(fd uintptr) { n, ferr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return n
}

func TestWidenPipes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if n := pipeSize(t, w); n >= sftpserver.PipeSize {
		t.Skipf("pipes here start at %d bytes already", n)
	}
	regular, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	sftpserver.WidenPipes(r, regular) // either end of a pipe sets its size
	if n := pipeSize(t, w); n != sftpserver.PipeSize {
		t.Errorf("pipe is %d bytes after WidenPipes, want %d", n, sftpserver.PipeSize)
	}
	// Still usable after, in the mode it had.
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := r.Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v", b, err)
	}
}
