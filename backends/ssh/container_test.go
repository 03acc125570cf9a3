package ssh_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// newVMBackend returns a backend that knows the container as host "vm"
// (its loopback port only) and closes with the test.
func newVMBackend(t testing.TB, c *sshtest.Container) *ssh.Backend {
	t.Helper()
	cfg := ssh.NewConfig()
	cfg.KnownHostsFiles = []string{c.KnownHosts}
	cfg.IdentityFiles = []string{c.IdentityFile}
	cfg.Hosts = map[string]ssh.Host{"vm": {Address: c.Addr, User: c.User}}
	cfg.AgentBinary = testutil.AgentBinary(t)
	b, err := ssh.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// createVM makes a workspace in a fresh directory on the container,
// destroyed when t ends.
func createVM(t *testing.T, b *ssh.Backend, c *sshtest.Container, id string) opsapi.Operations {
	t.Helper()
	opts, _ := json.Marshal(map[string]string{"host": "vm", "root": c.NewRoot()})
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: id, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // t.Context is canceled before cleanups run
		if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return ws.(opsapi.Operations)
}

// TestConformanceVM runs the suite against an sshd in a container of its
// own, reached through 127.0.0.1 only: the backend on an isolated machine.
func TestConformanceVM(t *testing.T) {
	c := sshtest.StartContainer(t)
	b := newVMBackend(t, c)
	backendtest.Run(t, backendtest.Options{Confined: false, New: func(t *testing.T) opsapi.Workspace {
		return createVM(t, b, c, "c")
	}})
}

// TestVMSessionsKilledMidCommand: every session process of the account is
// SIGKILLed while a command runs (the machine stays up). The call fails
// with ErrUnavailable instead of hanging, and the next calls reconnect.
func TestVMSessionsKilledMidCommand(t *testing.T) {
	c := sshtest.StartContainer(t)
	ws := createVM(t, newVMBackend(t, c), c, "loss")
	if err := ws.WriteFile(t.Context(), "kept", strings.NewReader("before")); err != nil {
		t.Fatal(err)
	}
	started := &signalWriter{ch: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		_, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "echo started; exec sleep 600", Output: started})
		errc <- err
	}()
	select {
	case <-started.ch:
	case err := <-errc:
		t.Fatalf("command ended before the kill: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("command never started")
	}
	c.KillSessions(t)
	select {
	case err := <-errc:
		if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "connection lost") {
			t.Fatalf("in-flight Exec: %v, want ErrUnavailable saying the connection was lost", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("in-flight Exec hung after its connection died")
	}

	var out bytes.Buffer
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "echo back", Output: &out})
	if err != nil || res.ExitCode != 0 || out.String() != "back\n" {
		t.Fatalf("Exec after the loss: %+v %v %q", res, err, out.String())
	}
	rc, err := ws.Open(t.Context(), "kept")
	if err != nil {
		t.Fatalf("Open after the loss: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "before" {
		t.Fatalf("content after the loss %q", got)
	}
}

// signalWriter closes ch at the first write.
type signalWriter struct {
	once sync.Once
	ch   chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

// TestForkBombOnVMIsKilledAtTimeout: on a machine whose process table is
// full (the container's pids limit stands for an account's process limit)
// sshd cannot start the kill session, so the kill script cannot run; the
// connection's kill helper, started before, stops and kills the bomb at
// its deadline, in its own process group or in new sessions, and the next
// command runs.
func TestForkBombOnVMIsKilledAtTimeout(t *testing.T) {
	c := sshtest.StartContainer(t, "--pids-limit", "200")
	b := newVMBackend(t, c)
	ws := createVM(t, b, c, "bomb")
	for _, bomb := range []string{
		`bomb() { bomb | bomb & }; bomb; sleep 100`,
		`setsid bash -c 'bomb() { setsid bash -c "$(declare -f bomb); bomb" & bomb & }; bomb' & sleep 100`,
	} {
		start := time.Now()
		res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: bomb, Timeout: 3 * time.Second})
		// Killed is not asserted: at a full process table the kill
		// script cannot fork to count what its group signal killed, so
		// the count may be 0 though every process died. What is left
		// is counted below.
		if err != nil || !res.TimedOut {
			t.Fatalf("fork bomb %q: %+v, %v", bomb, res, err)
		}
		if d := time.Since(start); d > 60*time.Second {
			t.Errorf("the bomb took %v to kill", d)
		}
		var out bytes.Buffer
		// Zombies are dead: they wait only for sshd, the container's
		// pid 1, to reap them, which may lag the kill by a moment.
		res, err = ws.Exec(t.Context(), opsapi.ExecRequest{Command: "ps -u " + c.User + " -o stat= | grep -vc '^Z'", Output: &out})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("the next command: %+v, %v", res, err)
		}
		// The SFTP server, the kill helper, this command and its ps and wc.
		if n, err := strconv.Atoi(strings.TrimSpace(out.String())); err != nil || n > 12 {
			t.Errorf("%q processes of %s left after killing %q", out.String(), c.User, bomb)
		}
	}
}
