package ssh_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/opsapi"
)

func create(t *testing.T, b *ssh.Backend, srv *sshtest.Server) opsapi.Operations {
	t.Helper()
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "loss", Options: rootOpts(srv, srv.WorkDir(t)+"/ws")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.(opsapi.Destroyer).Destroy(context.Background()) })
	return ws.(opsapi.Operations)
}

// TestSshdKilledMidCommand: the call fails with ErrUnavailable instead of
// hanging, the next call reconnects, and the orphaned command is killed
// after the reconnect.
func TestSshdKilledMidCommand(t *testing.T) {
	srv := sshtest.Start(t)
	ws := create(t, newBackend(t, srv), srv)
	errc := make(chan error, 1)
	go func() {
		_, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: `sh -c 'echo $$ > gc.pid; exec sleep 600' & wait`})
		errc <- err
	}()
	pidFile := filepath.Join(ws.Root(), "gc.pid")
	waitFor(t, func() bool { b, _ := os.ReadFile(pidFile); return len(b) > 0 })
	srv.Kill()
	select {
	case err := <-errc:
		if !errors.Is(err, opsapi.ErrUnavailable) {
			t.Fatalf("in-flight Exec: %v, want ErrUnavailable", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("in-flight Exec hung after sshd died")
	}
	if _, err := ws.Stat(t.Context(), "gc.pid"); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("Stat while sshd is down: %v, want ErrUnavailable", err)
	}
	srv.Restart()
	var out bytes.Buffer
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "echo back", Output: &out})
	if err != nil || res.ExitCode != 0 || out.String() != "back\n" {
		t.Fatalf("after restart: %+v %v %q", res, err, out.String())
	}
	// The lost call's process is reaped by the reconnected backend.
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitFor(t, func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestSshdKilledMidWrite: a large write cut by the dying connection fails
// clearly and leaves the old content (security case 23); after the
// restart a write succeeds and the temporary file is gone.
func TestSshdKilledMidWrite(t *testing.T) {
	srv := sshtest.Start(t)
	ws := create(t, newBackend(t, srv), srv)
	old := strings.Repeat("old content\n", 1000)
	if err := ws.WriteFile(t.Context(), "f", strings.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	r := &killingReader{n: 256 << 20, killAt: 4 << 20, kill: srv.Kill}
	done := make(chan error, 1)
	go func() { done <- ws.WriteFile(t.Context(), "f", r) }()
	select {
	case err := <-done:
		if !errors.Is(err, opsapi.ErrUnavailable) {
			t.Fatalf("WriteFile cut by the connection: %v, want ErrUnavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WriteFile hung after sshd died")
	}
	if got, _ := os.ReadFile(filepath.Join(ws.Root(), "f")); string(got) != old {
		t.Fatalf("target torn: %d bytes", len(got))
	}
	srv.Restart()
	if err := ws.WriteFile(t.Context(), "f", strings.NewReader("new")); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
	rc, err := ws.Open(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "new" {
		t.Fatalf("content %q", got)
	}
	waitFor(t, func() bool {
		entries, _ := os.ReadDir(ws.Root())
		return len(entries) == 1
	})
}

type killingReader struct {
	n, read, killAt int
	kill            func()
}

func (r *killingReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	if r.read >= r.killAt && r.kill != nil {
		r.kill()
		r.kill = nil
	}
	k := min(len(p), r.n-r.read)
	clear(p[:k])
	r.read += k
	return k, nil
}

// TestHostKeyMismatchRefused: a known_hosts entry with another key for
// the address stops the connection with ErrPermission.
func TestHostKeyMismatchRefused(t *testing.T) {
	srv := sshtest.Start(t)
	other := sshtest.Start(t) // its host key is not srv's
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{srv.Addr}, other.HostKey)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, srv, func(c *ssh.Config) { c.KnownHostsFiles = []string{kh} })
	_, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "x", Options: rootOpts(srv, srv.WorkDir(t)+"/ws")})
	if !errors.Is(err, opsapi.ErrPermission) || !strings.Contains(err.Error(), "MISMATCH") {
		t.Fatalf("Create with a mismatching host key: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b = newBackend(t, srv, func(c *ssh.Config) { c.KnownHostsFiles = []string{empty} })
	_, err = b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "x", Options: rootOpts(srv, srv.WorkDir(t)+"/ws")})
	if !errors.Is(err, opsapi.ErrPermission) || !strings.Contains(err.Error(), "unknown host key") {
		t.Fatalf("Create with an unknown host key: %v", err)
	}
}

// TestCreateRefusesUnlistedHostsAndOtherUsers.
func TestCreateRefusesUnlistedHostsAndOtherUsers(t *testing.T) {
	srv := sshtest.Start(t)
	b := newBackend(t, srv)
	for _, o := range []map[string]string{
		{"host": srv.Addr, "user": srv.User},
		{"host": "test", "user": "root"},
		{"host": "test", "root": "relative/dir"},
		{"host": "test", "bogus": "x"},
	} {
		raw, _ := json.Marshal(o)
		if _, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "x", Options: raw}); !errors.Is(err, opsapi.ErrInvalid) {
			t.Errorf("Create(%s) = %v, want ErrInvalid", raw, err)
		}
	}
}

// TestTimeoutKillsRemoteGrandchild: a grandchild that ignores SIGTERM in
// a setsid'd session of its own is gone after the deadline.
func TestTimeoutKillsRemoteGrandchild(t *testing.T) {
	srv := sshtest.Start(t)
	ws := create(t, newBackend(t, srv), srv)
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{
		Command: `setsid sh -c 'trap "" TERM; echo $$ > gc.pid; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & sleep 600`,
		Timeout: time.Second,
	})
	if err != nil || !res.TimedOut {
		t.Fatalf("%+v %v", res, err)
	}
	b, _ := os.ReadFile(filepath.Join(ws.Root(), "gc.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid == 0 {
		t.Fatal("grandchild never ran")
	}
	waitFor(t, func() bool { return syscall.Kill(pid, 0) != nil })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}
