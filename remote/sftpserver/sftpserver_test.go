package sftpserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"github.com/wsbroker/wsbroker/remote/sftpext"
)

// start serves on pipes and returns a pkg/sftp client on them; served
// yields Serve's result once the client side is closed.
func start(t *testing.T) (c *sftp.Client, served <-chan error) {
	t.Helper()
	cr, sw := io.Pipe() // server to client
	sr, cw := io.Pipe() // client to server
	done := make(chan error, 1)
	go func() {
		err := Serve(sr, sw)
		sw.CloseWithError(io.EOF)
		done <- err
	}()
	c, err := sftp.NewClientPipe(cr, cw, sftp.UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, done
}

func atomicWriteReq(c *sftp.Client, p, content string) error {
	return c.SetExtendedData(p, []sftp.StatExtended{{ExtType: sftpext.AtomicWrite, ExtData: content}})
}

func wantCode(t *testing.T, err error, code uint32) {
	t.Helper()
	// pkg/sftp's client turns these two codes into fs errors.
	if code == codeNoSuchFile && errors.Is(err, os.ErrNotExist) || code == codePermission && errors.Is(err, os.ErrPermission) {
		return
	}
	var se *sftp.StatusError
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("error = %v, want status code %d", err, code)
	}
}

func wantContent(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("%s holds %q, want %q", p, b, want)
	}
}

func wantNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), sftpext.TempSuffix) {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

func TestAtomicWrite(t *testing.T) {
	c, _ := start(t)
	if v, ok := c.HasExtension(sftpext.AtomicWrite); !ok || v != "1" {
		t.Fatalf("VERSION advertises %q %v, want atomic-write 1", v, ok)
	}
	if _, ok := c.HasExtension("posix-rename@openssh.com"); !ok {
		t.Fatal("pkg/sftp's own extensions are no longer advertised")
	}
	dir := t.TempDir()

	t.Run("new file", func(t *testing.T) {
		p := filepath.Join(dir, "new.txt")
		if err := atomicWriteReq(c, p, "hello\x00world"); err != nil {
			t.Fatal(err)
		}
		wantContent(t, p, "hello\x00world")
	})
	t.Run("replace keeps mode", func(t *testing.T) {
		p := filepath.Join(dir, "mode.sh")
		if err := os.WriteFile(p, []byte("old"), 0o751); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o751); err != nil {
			t.Fatal(err)
		}
		if err := atomicWriteReq(c, p, "new"); err != nil {
			t.Fatal(err)
		}
		wantContent(t, p, "new")
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o751 {
			t.Fatalf("mode %v, want 0751", fi.Mode().Perm())
		}
	})
	t.Run("empty content", func(t *testing.T) {
		p := filepath.Join(dir, "empty")
		if err := atomicWriteReq(c, p, ""); err != nil {
			t.Fatal(err)
		}
		wantContent(t, p, "")
	})
	t.Run("symlink followed", func(t *testing.T) {
		sub := filepath.Join(dir, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "real"), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		// A relative link through a second link: both are followed.
		if err := os.Symlink("sub/real", filepath.Join(dir, "link1")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(dir, "link1"), filepath.Join(dir, "link2")); err != nil {
			t.Fatal(err)
		}
		if err := atomicWriteReq(c, filepath.Join(dir, "link2"), "through links"); err != nil {
			t.Fatal(err)
		}
		wantContent(t, filepath.Join(sub, "real"), "through links")
		if fi, err := os.Lstat(filepath.Join(dir, "link2")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the link was replaced: %v %v", fi, err)
		}
		wantNoTemp(t, sub)
		// A dangling link creates its target.
		if err := os.Symlink("created", filepath.Join(dir, "dangling")); err != nil {
			t.Fatal(err)
		}
		if err := atomicWriteReq(c, filepath.Join(dir, "dangling"), "made"); err != nil {
			t.Fatal(err)
		}
		wantContent(t, filepath.Join(dir, "created"), "made")
	})
	t.Run("errors name the errno", func(t *testing.T) {
		file := filepath.Join(dir, "file")
		if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("loop", filepath.Join(dir, "loop")); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			path string
			code uint32
		}{
			{filepath.Join(dir, "missing", "f"), codeNoSuchFile},
			{filepath.Join(file, "f"), codeNotADirectory},
			{filepath.Join(dir, "sub"), codeIsADirectory},
			{filepath.Join(dir, "loop"), codeLinkLoop},
			{"relative/path", codeBadMessage},
		} {
			wantCode(t, atomicWriteReq(c, tc.path, "x"), tc.code)
		}
		wantContent(t, file, "keep")
		wantNoTemp(t, dir)
	})
	t.Run("content over the limit", func(t *testing.T) {
		p := filepath.Join(dir, "big")
		if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		wantCode(t, atomicWriteReq(c, p, strings.Repeat("x", sftpext.MaxAtomicWrite+1)), codeBadMessage)
		wantContent(t, p, "keep")
		if err := atomicWriteReq(c, p, strings.Repeat("x", sftpext.MaxAtomicWrite)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("other setstats reach pkg/sftp", func(t *testing.T) {
		p := filepath.Join(dir, "chmod")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v after chmod", fi.Mode().Perm())
		}
		// Extended pairs that are not ours: pkg/sftp ignores them.
		if err := c.SetExtendedData(p, []sftp.StatExtended{{ExtType: "other@example.com", ExtData: "x"}}); err != nil {
			t.Fatal(err)
		}
		wantContent(t, p, "")
	})
}

// TestRepliesNeverInterleave runs atomic writes while large reads are in
// flight: pkg/sftp writes each reply in two pieces, and an atomic-write
// reply landing between them would corrupt the stream.
func TestRepliesNeverInterleave(t *testing.T) {
	c, _ := start(t)
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	bigPath := filepath.Join(dir, "big")
	if err := os.WriteFile(bigPath, big, 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				p := filepath.Join(dir, fmt.Sprintf("w%d", g))
				want := fmt.Sprintf("goroutine %d write %d", g, i)
				if err := atomicWriteReq(c, p, want); err != nil {
					errs <- err
					return
				}
				if got, err := os.ReadFile(p); err != nil || string(got) != want {
					errs <- fmt.Errorf("%s: %q %v", p, got, err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 5 {
				f, err := c.Open(bigPath)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(f)
				f.Close()
				if err != nil || !bytes.Equal(got, big) {
					errs <- fmt.Errorf("large read: %d bytes, %v", len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBadPackets: a request naming the extension but cut short is refused
// with a status; a packet over the size limit ends the session.
func TestBadPackets(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(sr, sw) }()
	send := func(body []byte) {
		t.Helper()
		pkt := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		if _, err := cw.Write(append(pkt, body...)); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() []byte {
		t.Helper()
		var n [4]byte
		if _, err := io.ReadFull(cr, n[:]); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(cr, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	send([]byte{1, 0, 0, 0, 3}) // INIT, version 3
	if v := recv(); v[0] != fxpVersion || !bytes.Contains(v, []byte(sftpext.AtomicWrite)) {
		t.Fatalf("VERSION reply %q", v)
	}

	// SETSTAT id 7, path "/x", extended flag, one pair whose value's
	// length runs past the packet.
	body := []byte{fxpSetstat}
	body = binary.BigEndian.AppendUint32(body, 7)
	body = appendString(body, "/x")
	body = binary.BigEndian.AppendUint32(body, attrExtended)
	body = binary.BigEndian.AppendUint32(body, 1)
	body = appendString(body, sftpext.AtomicWrite)
	body = binary.BigEndian.AppendUint32(body, 1000)
	send(append(body, "short"...))
	st := recv()
	if st[0] != fxpStatus || binary.BigEndian.Uint32(st[1:]) != 7 || binary.BigEndian.Uint32(st[5:]) != codeBadMessage {
		t.Fatalf("reply to a cut request: %q", st)
	}

	hdr := binary.BigEndian.AppendUint32(nil, maxPacket+1)
	if _, err := cw.Write(hdr); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Serve after an oversized packet: %v", err)
	}
}

// TestServeEndsCleanly: the client closing its end is a clean finish.
func TestServeEndsCleanly(t *testing.T) {
	c, served := start(t)
	if _, err := c.Getwd(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v at a clean end of input", err)
	}
}
