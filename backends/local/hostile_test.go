package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/backends/local/cgroups"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// requireSandbox skips where the sandbox cannot run (not root, not Linux).
func requireSandbox(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox is Linux's")
	}
}

// ioUringSetup calls io_uring_setup(8, params) through Debian's python3
// (readable in the sandbox) and prints the descriptor or the error.
const ioUringSetup = `/usr/bin/python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(425, 8, ctypes.create_string_buffer(120))
print("fd", fd) if fd >= 0 else print("refused", os.strerror(ctypes.get_errno()))'`

// TestSandboxRefusesIOUring: io_uring is a second way into the kernel's
// calls, past the seccomp filter; the sandbox refuses to set one up
// (issue 37, finding 9).
func TestSandboxRefusesIOUring(t *testing.T) {
	requireSandbox(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testutil.SkipOrFail(t, "the io_uring probe needs /usr/bin/python3: "+err.Error())
	}
	ws := newWorkspace(t, local.Config{Sandbox: local.SandboxConfig{Mode: "on"}})
	out := sh(t, ws, ioUringSetup)
	if !strings.HasPrefix(out, "refused Operation not permitted") {
		t.Fatalf("io_uring_setup in the sandbox: %q, want refused with EPERM", out)
	}
}

// TestCommandsInheritNoDescriptors: a descriptor the broker holds without
// close-on-exec (one it inherited from a supervisor, say) reaches no
// command, sandboxed or not: here one on a root-only file, whose number
// the command neither lists in /proc/self/fd nor reads from (issue 37,
// finding 4).
func TestCommandsInheritNoDescriptors(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root-only-bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opened, err := unix.Open(secret, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// dup2 onto a number no command opens by itself, without the flag:
	// as a supervisor leaves one.
	const fd = 77
	if err := unix.Dup2(opened, fd); err != nil {
		t.Fatal(err)
	}
	unix.Close(opened)
	t.Cleanup(func() { unix.Close(fd) })
	probe := fmt.Sprintf("ls /proc/self/fd; cat <&%d; echo end", fd)
	modes := []string{"off"}
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		modes = append(modes, "on")
	}
	for _, mode := range modes {
		t.Run("sandbox="+mode, func(t *testing.T) {
			ws := newWorkspace(t, local.Config{Sandbox: local.SandboxConfig{Mode: mode}})
			out, _ := run(t, ws, opsapi.ExecRequest{Command: probe})
			if !strings.Contains(out, "end") {
				t.Fatalf("the probe did not run: %q", out)
			}
			if strings.Contains(out, "root-only-bytes") || slices.Contains(strings.Fields(out), strconv.Itoa(fd)) {
				t.Fatalf("the command holds the broker's descriptor %d: %q", fd, out)
			}
		})
	}
}

// TestCreateRefusesLimitsAboveConfigured: a create (whose options a
// tenant or a model chooses) may ask for less than the operator's limits,
// never more: above them it is ErrInvalid naming each limit and both
// values (issue 37, finding 2).
func TestCreateRefusesLimitsAboveConfigured(t *testing.T) {
	b := newBackend(t, local.Config{Limits: local.Limits{Limits: cgroups.Limits{MemoryBytes: 256 << 20, Pids: 256}}})
	opts := json.RawMessage(`{"limits":{"memoryBytes":68719476736,"pids":1000000}}`)
	_, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "greedy", Options: opts})
	if !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("create above the configured limits: %v, want ErrInvalid", err)
	}
	for _, want := range []string{"limits.memoryBytes 68719476736", "of 268435456", "limits.pids 1000000", "of 256"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	if os.Geteuid() != 0 {
		return // below them, limits need cgroups
	}
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "modest", Options: json.RawMessage(`{"limits":{"memoryBytes":134217728,"pids":100}}`)})
	if err != nil {
		t.Fatalf("create below the configured limits: %v", err)
	}
	lw := ws.(*local.Workspace)
	t.Cleanup(func() { _ = lw.Destroy(context.Background()) })
	if got := groupFile(t, lw, "pids", "pids.max"); got != "100" {
		t.Fatalf("pids.max %q, want the 100 asked for", got)
	}
}

// groupFile reads file of the workspace's cgroup in the hierarchy of ctrl
// (v1), or in the unified one: the parent of a command's own group.
func groupFile(t *testing.T, ws *local.Workspace, ctrl, file string) string {
	t.Helper()
	out := sh(t, ws, "cat /proc/self/cgroup")
	dir := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) == 3 && slices.Contains(strings.Split(f[1], ","), ctrl):
			dir = filepath.Join("/sys/fs/cgroup", ctrl, filepath.Dir(f[2]))
		case len(f) == 3 && f[0] == "0" && dir == "":
			dir = filepath.Join("/sys/fs/cgroup", filepath.Dir(f[2]))
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatalf("the workspace's group (from %q): %v", out, err)
	}
	return strings.TrimSpace(string(b))
}

// TestWorkspacesHaveDefaultLimits: with no limits configured, a workspace
// gets docker's defaults, 2 GiB of memory and 4096 pids (issue 37,
// finding 7).
func TestWorkspacesHaveDefaultLimits(t *testing.T) {
	testutil.RequireRoot(t)
	ws := newWorkspace(t, local.Config{})
	out, res := run(t, ws, opsapi.ExecRequest{Command: "true"})
	if res.MemoryLimit != local.DefaultMemoryBytes {
		t.Fatalf("memory limit %d (%q), want %d", res.MemoryLimit, out, local.DefaultMemoryBytes)
	}
	if got := groupFile(t, ws, "pids", "pids.max"); got != strconv.Itoa(local.DefaultPids) {
		t.Fatalf("pids.max %q, want %d", got, local.DefaultPids)
	}
}

// TestTurningLimitsOffIsWarned: -1 turns a default limit off, and the
// backend says so at start, through the logger it is given.
func TestTurningLimitsOffIsWarned(t *testing.T) {
	var logs syncBuffer
	cfg := local.Config{StateDir: t.TempDir(), Limits: local.Limits{Limits: cgroups.Limits{MemoryBytes: local.Unlimited, Pids: local.Unlimited}}}
	b, err := local.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no memory limit (local.limits.memoryBytes: -1)", "no pids limit (local.limits.pids: -1)"} {
		if !slices.ContainsFunc(strings.Split(logs.String(), "\n"), func(line string) bool {
			return strings.Contains(line, "level=WARN") && strings.Contains(line, want)
		}) {
			t.Errorf("no warning %q at start in:\n%s", want, logs.String())
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	w, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "free"})
	if err != nil {
		t.Fatal(err)
	}
	ws := w.(*local.Workspace)
	t.Cleanup(func() { _ = ws.Destroy(context.Background()) })
	if _, res := run(t, ws, opsapi.ExecRequest{Command: "true"}); res.MemoryLimit != 0 {
		t.Fatalf("memory limit %d, want none", res.MemoryLimit)
	}
	if got := groupFile(t, ws, "pids", "pids.max"); got != "max" {
		t.Fatalf("pids.max %q, want max", got)
	}
}

// TestShmIsBoundedAndCharged: a sandboxed workspace's /dev/shm keeps its
// pages after its commands end, so it is at most half the workspace's
// memory limit, and what it holds counts against that limit (issue 37,
// finding 7).
func TestShmIsBoundedAndCharged(t *testing.T) {
	requireSandbox(t)
	b := newBackend(t, local.Config{Sandbox: local.SandboxConfig{Mode: "on"}})
	w, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "shm", Options: json.RawMessage(`{"limits":{"memoryBytes":67108864}}`)})
	if err != nil {
		t.Fatal(err)
	}
	ws := w.(*local.Workspace)
	t.Cleanup(func() { _ = ws.Destroy(context.Background()) })
	if out := sh(t, ws, "grep ' /dev/shm ' /proc/self/mounts"); !strings.Contains(out, "size=32768k") {
		t.Fatalf("/dev/shm of a workspace limited to 64 MiB: %q, want size=32768k", out)
	}
	if out, _ := run(t, ws, opsapi.ExecRequest{Command: "head -c 40M /dev/zero > /dev/shm/big; echo $?"}); strings.TrimSpace(out) == "0" {
		t.Fatalf("40 MiB fit in /dev/shm: %q", out)
	}
	sh(t, ws, "rm -f /dev/shm/big; head -c 24M /dev/zero > /dev/shm/kept")
	usage := "memory.current"
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil {
		usage = "memory.usage_in_bytes" // v1
	}
	held := groupFile(t, ws, "memory", usage)
	if n, err := strconv.ParseInt(held, 10, 64); err != nil || n < 24<<20 {
		t.Fatalf("the workspace's group holds %q bytes once the writer ended, want the 24 MiB /dev/shm keeps", held)
	}
}
