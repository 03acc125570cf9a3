package execsftp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// proc is a local command as a Process.
type proc struct {
	cmd   *exec.Cmd
	out   *os.File
	stdin io.WriteCloser
	done  chan struct{}
}

func (p *proc) Stdout() io.Reader     { return p.out }
func (p *proc) Stdin() io.WriteCloser { return p.stdin }
func (p *proc) Done() <-chan struct{} { return p.done }
func (p *proc) Close() error          { p.stdin.Close(); return p.out.Close() }

// local runs commands on this host, as a box would, counting them.
type local struct {
	t      *testing.T
	starts int
	last   *proc
}

func (l *local) start(ctx context.Context, argv []string, stderr io.Writer) (Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = w, stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.Close()
	p := &proc{cmd: cmd, out: r, stdin: stdin, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	l.t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	l.starts++
	l.last = p
	return p, nil
}

// TestChannel: the channel reports the server's account, serves SFTP,
// and replaces a server that died at the next use.
func TestChannel(t *testing.T) {
	testutil.RequireCommand(t, "sh")
	bin := testutil.AgentBinary(t) // with no arguments, an SFTP server on stdio
	l := &local{t: t}
	c := New(Config{Op: "test.sftp", Start: l.start, Servers: []string{"/nonexistent/sftp-server", bin}, Logger: testutil.Logger(t)})
	defer c.Close()
	id, err := c.Identity(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != os.Geteuid() || len(id.GIDs) == 0 || id.GIDs[0] != os.Getegid() {
		t.Errorf("identity %+v, want uid %d, gid %d first", id, os.Geteuid(), os.Getegid())
	}
	dir := t.TempDir()
	sc, err := c.SFTP(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Mkdir(filepath.Join(dir, "made")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Errorf("the directory made over SFTP: %v", err)
	}
	if again, err := c.SFTP(t.Context(), nil); err != nil || again != sc || l.starts != 1 {
		t.Errorf("a live channel was not reused: %v, %d starts", err, l.starts)
	}
	if err := l.last.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.last.done
	sc2, err := c.SFTP(t.Context(), nil)
	if err != nil || sc2 == sc || l.starts != 2 {
		t.Fatalf("after the server died: %v, %d starts", err, l.starts)
	}
	if _, err := sc2.Stat(dir); err != nil {
		t.Errorf("the new channel: %v", err)
	}
	if sc3, err := c.SFTP(t.Context(), sc2); err != nil || sc3 == sc2 || l.starts != 3 {
		t.Errorf("a channel the caller found broken was not replaced: %v, %d starts", err, l.starts)
	}
}

// TestChannelWithoutServer: no server at any path is ErrUnavailable,
// naming the paths and what to do.
func TestChannelWithoutServer(t *testing.T) {
	testutil.RequireCommand(t, "sh")
	l := &local{t: t}
	c := New(Config{Op: "test.sftp", Start: l.start, Servers: []string{"/nonexistent/a", "/nonexistent/b"},
		Where: "on this host", Hint: "install one"})
	_, err := c.SFTP(t.Context(), nil)
	if !errors.Is(err, opsapi.ErrUnavailable) ||
		!strings.Contains(err.Error(), "no sftp server on this host (looked for /nonexistent/a, /nonexistent/b); install one") {
		t.Fatalf("no server: %v", err)
	}
}

// TestControlWriter: control lines reach the channel, a long line is cut,
// and nothing blocks when no one reads.
func TestControlWriter(t *testing.T) {
	var logs testutil.LockedBuffer
	c := newControlWriter(slog.New(slog.NewTextHandler(&logs, nil)))
	if _, err := io.WriteString(c, "@wsbroker Uid:\t1\t2\n"+strings.Repeat("x", 3000)+"\n@wsbro"); err != nil {
		t.Fatal(err)
	}
	if got := <-c.lines; got != "Uid:\t1\t2" {
		t.Errorf("control line %q", got)
	}
	for range 40 {
		_, _ = io.WriteString(c, "ker server /x\n@wsbro")
	}
	if len(c.lines) != cap(c.lines) {
		t.Errorf("%d lines queued, want the channel full (%d)", len(c.lines), cap(c.lines))
	}
	if !strings.Contains(logs.String(), "sftp server says") || !strings.Contains(logs.String(), strings.Repeat("x", maxControlLine)) ||
		strings.Contains(logs.String(), strings.Repeat("x", maxControlLine+1)) {
		t.Errorf("the long line was not logged cut at %d bytes:\n%.200s", maxControlLine, logs.String())
	}
	if !strings.Contains(logs.String(), "@wsbroker server /x") {
		t.Errorf("control lines past the channel's room were not logged:\n%.200s", logs.String())
	}
}
