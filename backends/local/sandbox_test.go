package local_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// confinedThreads counts this process's threads under a seccomp filter.
func confinedThreads(t *testing.T) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range tasks {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "\nSeccomp:\t2\n") {
			n++
		}
	}
	return n
}

// TestSandboxConfinesOneThreadPerWorkspace: the confinement lives on one
// thread per workspace that ran a command (its spawner), never on the
// rest of the broker, which still reads what commands may not; the
// thread ends with its workspace.
func TestSandboxConfinesOneThreadPerWorkspace(t *testing.T) {
	testutil.RequireRoot(t)
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox is Linux's")
	}
	before := confinedThreads(t)
	b := newBackend(t, local.Config{Sandbox: local.SandboxConfig{Mode: "on"}})
	var wss []opsapi.Workspace
	for _, id := range []string{"a", "b"} {
		ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		wss = append(wss, ws)
		var out syncBuffer
		if res, err := ws.(*local.Workspace).Exec(t.Context(), opsapi.ExecRequest{Command: "cat /etc/shadow || echo denied", Output: &out}); err != nil || res.ExitCode != 0 || !strings.Contains(out.String(), "denied") {
			t.Fatalf("sandboxed command: %+v %v %q", res, err, out.String())
		}
	}
	if n := confinedThreads(t) - before; n != 2 {
		t.Errorf("%d confined threads for 2 workspaces, want 2", n)
	}
	if _, err := os.ReadFile("/etc/shadow"); err != nil {
		t.Errorf("the broker itself lost access: %v", err)
	}
	for _, ws := range wss {
		if err := ws.(*local.Workspace).Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the spawner threads to end", func() bool { return confinedThreads(t) == before })
}
