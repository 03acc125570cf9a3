package local_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// newWorkspace returns a fresh workspace destroyed at cleanup; cfg's zero
// fields take the defaults.
func newWorkspace(t testing.TB, cfg local.Config) *local.Workspace {
	t.Helper()
	ws, err := newBackend(t, cfg).Create(context.Background(), opsapi.WorkspaceSpec{ID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	lw := ws.(*local.Workspace)
	t.Cleanup(func() {
		if err := lw.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return lw
}

// newBackend returns a backend whose state lives in a fresh directory
// unless cfg names one; cfg's zero fields take the defaults.
func newBackend(t testing.TB, cfg local.Config) *local.Backend {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	b, err := local.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncBuffer is an Output that may be read while Exec writes, and that
// records writes made after Exec returned.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
	late   int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		b.late++
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// run executes command and returns its output and result.
func run(t testing.TB, ws *local.Workspace, req opsapi.ExecRequest) (string, opsapi.ExecResult) {
	t.Helper()
	out := &syncBuffer{}
	req.Output = out
	res, err := ws.Exec(context.Background(), req)
	out.close()
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Command, err)
	}
	t.Cleanup(func() {
		if out.late > 0 {
			t.Errorf("Exec(%q) wrote output %d times after it returned", req.Command, out.late)
		}
	})
	return out.String(), res
}

func sh(t testing.TB, ws *local.Workspace, command string) string {
	t.Helper()
	out, res := run(t, ws, opsapi.ExecRequest{Command: command})
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d: %s", command, res.ExitCode, out)
	}
	return out
}

// pidAlive reports whether pid runs and is not a zombie.
func pidAlive(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

// eventually polls cond for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// pids reads whitespace-separated pids a command wrote into file.
func pids(t testing.TB, ws *local.Workspace, file string) []string {
	t.Helper()
	var b []byte
	eventually(t, file, func() bool {
		rc, err := ws.Open(context.Background(), file)
		if err != nil {
			return false
		}
		defer rc.Close()
		b, _ = io.ReadAll(rc)
		return len(strings.Fields(string(b))) > 0
	})
	return strings.Fields(string(b))
}

func readFile(t testing.TB, ws *local.Workspace, p string) string {
	t.Helper()
	rc, err := ws.Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
