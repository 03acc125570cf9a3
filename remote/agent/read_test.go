package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// TestReadFileStreamsTheWholeFile: OpRead gives a file's bytes exactly,
// large and empty alike, and a pseudo-file's to its end.
func TestReadFileStreamsTheWholeFile(t *testing.T) {
	c, _ := serve(t)
	dir := t.TempDir()
	big := make([]byte, 3<<20+17)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"big": big, "empty": nil, "small": []byte("hi\n")} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rc, err := c.ReadFile(t.Context(), p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
	}
	rc, err := c.ReadFile(t.Context(), "/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !strings.Contains(string(got), "Pid:") {
		t.Fatalf("/proc/self/status read as %q", got)
	}
}

// TestReadFileRefusesWhatIsNotAFile: a missing path, a directory and a
// fifo are refused with their kinds, and the fifo does not hang the
// agent waiting for a writer.
func TestReadFileRefusesWhatIsNotAFile(t *testing.T) {
	c, _ := serve(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		kind error
	}{
		{filepath.Join(dir, "missing"), opsapi.ErrNotExist},
		{dir, opsapi.ErrIsDir},
		{fifo, opsapi.ErrInvalid},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := c.ReadFile(ctx, tc.path)
		cancel()
		if k := opsapi.Classify(err); k != tc.kind {
			t.Errorf("ReadFile(%s) = %v (%v), want %v", tc.path, err, k, tc.kind)
		}
	}
}

// TestReadFileLeftEarlyFreesTheAgent: a reader that closes after the
// first bytes of a large file does not leave the agent blocked on a full
// window, holding the file open.
func TestReadFileLeftEarlyFreesTheAgent(t *testing.T) {
	c, _ := serve(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 32<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		rc, err := c.ReadFile(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(rc, make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	// The agent serves in this process: its descriptors of the file
	// must go at once, not when yamux gives up on the streams (30 s).
	deadline := time.Now().Add(5 * time.Second)
	for openOf(t, p) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors of the file still open 5 s after the readers left", openOf(t, p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openOf counts this process's descriptors open on path.
func openOf(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestReadFileEndsWithItsContext: a cancel mid-read ends Read with the
// context's error, not a short file taken for whole.
func TestReadFileEndsWithItsContext(t *testing.T) {
	c, _ := serve(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, bytes.Repeat([]byte("y"), 32<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	rc, err := c.ReadFile(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, context.Canceled) {
		t.Fatalf("reading on after the cancel: %v, want context.Canceled", err)
	}
}

// TestWriteFileReplacesAtomically: OpWrite replaces a file whole,
// keeps its mode, writes through a link to its target, and refuses a
// missing parent and a directory.
func TestWriteFileReplacesAtomically(t *testing.T) {
	c, _ := serve(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old content that is longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789"), 300_000)
	if err := c.WriteFile(t.Context(), p, bytes.NewReader(data), true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatalf("the file holds %d bytes, want %d", len(got), len(data))
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the old 0600 kept", fi.Mode().Perm())
	}
	if err := os.Symlink("f", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(t.Context(), filepath.Join(dir, "link"), strings.NewReader("through the link"), false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "through the link" {
		t.Errorf("the link's target holds %q", got)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "link")); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced by a file")
	}
	if err := c.WriteFile(t.Context(), filepath.Join(dir, "missing", "f"), strings.NewReader("x"), false); opsapi.Classify(err) != opsapi.ErrNotExist {
		t.Errorf("WriteFile under a missing directory: %v, want not_exist", err)
	}
	if err := c.WriteFile(t.Context(), dir, strings.NewReader("x"), false); opsapi.Classify(err) != opsapi.ErrIsDir {
		t.Errorf("WriteFile of a directory: %v, want is_dir", err)
	}
	if c.WriteFile(t.Context(), "relative", strings.NewReader("x"), false) == nil {
		t.Error("WriteFile of a relative path succeeded")
	}
}

// TestWriteFileWhoseSourceFailsLeavesTheFile: a source that fails, or a
// context that ends, midway leaves the old file byte-identical and no
// temporary file behind.
func TestWriteFileWhoseSourceFailsLeavesTheFile(t *testing.T) {
	c, _ := serve(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("source failed")
	r := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 2<<20)), iotest.ErrReader(boom))
	if err := c.WriteFile(t.Context(), p, r, false); !errors.Is(err, boom) {
		t.Fatalf("WriteFile with a failing reader: %v, want %v", err, boom)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(bytes.Repeat([]byte("y"), 1<<20))
		cancel()
		// A source blocked in Read is not interrupted by the cancel
		// (sftpops' ctxReader checks between reads); this one ends too.
		time.Sleep(100 * time.Millisecond)
		pw.CloseWithError(errors.New("source gave up"))
	}()
	if err := c.WriteFile(ctx, p, pr, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteFile canceled midway: %v, want context.Canceled", err)
	}
	// The agent drops its temporary file once it sees the stream end.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := os.ReadFile(p)
		entries, _ := os.ReadDir(dir)
		if string(got) == "original" && len(entries) == 1 {
			break
		}
		if time.Now().After(deadline) {
			names := []string{}
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("after two aborted writes the file holds %q and the directory %v", got, names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadDirListsInOneAnswer: OpReadDir lists sorted entries described
// as a stat would (a link by its target, flagged; a dangling one as a
// link), times in whole seconds, and refuses a file and a missing path.
func TestReadDirListsInOneAnswer(t *testing.T) {
	c, _ := serve(t)
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "b.txt"), []byte("12345"), 0o640))
	must(os.Mkdir(filepath.Join(dir, "a-dir"), 0o750))
	must(os.Symlink("b.txt", filepath.Join(dir, "c-link")))
	must(os.Symlink("nowhere", filepath.Join(dir, "d-dangling")))
	got, err := c.ReadDir(t.Context(), dir)
	must(err)
	mtime, _ := os.Stat(filepath.Join(dir, "b.txt"))
	want := []opsapi.FileInfo{
		{Name: "a-dir", Type: opsapi.TypeDir, Mode: 0o750},
		{Name: "b.txt", Type: opsapi.TypeFile, Size: 5, Mode: 0o640, ModTime: time.Unix(mtime.ModTime().Unix(), 0)},
		{Name: "c-link", Type: opsapi.TypeFile, Size: 5, Mode: 0o640, ModTime: time.Unix(mtime.ModTime().Unix(), 0), Symlink: true},
		{Name: "d-dangling", Type: opsapi.TypeSymlink, Symlink: true},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Type != w.Type || g.Symlink != w.Symlink || (w.Type == opsapi.TypeFile && (g.Size != w.Size || g.Mode != w.Mode || !g.ModTime.Equal(w.ModTime))) ||
			(w.Type == opsapi.TypeDir && g.Mode != w.Mode) || g.ModTime.Nanosecond() != 0 {
			t.Errorf("entry %d = %+v, want %+v", i, g, w)
		}
	}
	if _, err := c.ReadDir(t.Context(), filepath.Join(dir, "b.txt")); opsapi.Classify(err) != opsapi.ErrNotDir {
		t.Errorf("ReadDir of a file: %v, want not_dir", err)
	}
	if _, err := c.ReadDir(t.Context(), filepath.Join(dir, "missing")); opsapi.Classify(err) != opsapi.ErrNotExist {
		t.Errorf("ReadDir of a missing path: %v, want not_exist", err)
	}
}

// TestFailedWriteIsCleanWhenItReturns: over a slow connection (the
// client's bytes reach the agent 50 ms late, as over a pod's exec
// stream), a write whose source fails returns only once the agent has
// dropped its temporary file, not when the client has sent the abort.
func TestFailedWriteIsCleanWhenItReturns(t *testing.T) {
	agentBinary(t)
	clientEnd, agentSide := net.Pipe()
	relayIn, agentEnd := net.Pipe()
	s := &agent.Server{Self: binary}
	go func() { _ = s.ServeConn(agentEnd) }()
	go delayCopy(relayIn, agentSide, 50*time.Millisecond)
	go func() { _, _ = io.Copy(agentSide, relayIn) }()
	t.Cleanup(func() {
		clientEnd.Close()
		agentSide.Close()
		relayIn.Close()
		agentEnd.Close()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := agentclient.New(ctx, clientEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("source failed")
	r := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 300<<10)), iotest.ErrReader(boom))
	if err := c.WriteFile(ctx, p, r, false); !errors.Is(err, boom) {
		t.Fatalf("WriteFile with a failing reader: %v, want %v", err, boom)
	}
	entries, _ := os.ReadDir(dir)
	got, _ := os.ReadFile(p)
	if len(entries) != 1 || string(got) != "original" {
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("when WriteFile returned, the file held %q and the directory %v", got, names)
	}
}

// delayCopy copies src to dst, each read delivered d after it arrived,
// in order: a connection with latency.
func delayCopy(dst io.WriteCloser, src io.Reader, d time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
	dst.Close()
}
