package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// cgroupModes are the containment modes to test: cgroups where this host
// allows them (as root) and the fallback everywhere.
func cgroupModes(t *testing.T) []string {
	if os.Geteuid() == 0 {
		return []string{"auto", "off"}
	}
	return []string{"off"}
}

func alive(pid int) bool { return pidAlive(strconv.Itoa(pid)) }

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("process %d still alive", pid)
}

func readPid(t *testing.T, ws *local.Workspace, name string) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(ws.Root(), name))
		if n, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil && n > 0 {
			return n
		}
	}
	t.Fatalf("no pid in %s", name)
	return 0
}

func TestCgroupTimeoutKillsAnEnvClearingSetsidEscapee(t *testing.T) {
	testutil.RequireRoot(t)
	ws := newWorkspace(t, local.Config{Exec: execconf.Exec{KillGrace: 200 * time.Millisecond}})
	res, err := ws.Exec(context.Background(), opsapi.ExecRequest{
		// Leaves the process group and every marker.
		Command: `setsid env -i /bin/sh -c 'echo $$ > esc.pid; exec sleep 600' & sleep 600`,
		Timeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Killed < 2 {
		t.Errorf("result %+v, want TimedOut and Killed >= 2", res)
	}
	pid := readPid(t, ws, "esc.pid")
	waitGone(t, pid)
}

// TestAStartReturnsWithTheCommandInItsCgroup: a command's start ends
// only once the command is in its own cgroup (on v1 its shell enters it
// after exec), so that the next fork waits for it (package procstart),
// sandboxed or not.
func TestAStartReturnsWithTheCommandInItsCgroup(t *testing.T) {
	testutil.RequireRoot(t)
	for _, mode := range []string{"off", "auto"} {
		t.Run("sandbox "+mode, func(t *testing.T) {
			ws := newWorkspace(t, local.Config{Sandbox: local.SandboxConfig{Mode: mode}})
			var outside []string
			defer local.AfterStart(func(pid int) {
				b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
				if err != nil || !strings.Contains(string(b), "/cmd-") {
					outside = append(outside, fmt.Sprintf("%s%v", b, err))
				}
			})()
			for range 5 {
				if res, err := ws.Exec(context.Background(), opsapi.ExecRequest{Command: "sleep 0.2"}); err != nil || res.ExitCode != 0 {
					t.Fatalf("Exec = %+v, %v", res, err)
				}
			}
			// One is let pass: a start gives up waiting after 250 ms, which
			// a shell on a saturated machine can take to load.
			if len(outside) > 1 {
				t.Errorf("%d of 5 starts returned before their command was in its cgroup: %q", len(outside), outside)
			}
		})
	}
}

func TestProcessesListsAndKillsBackgroundChildren(t *testing.T) {
	for _, mode := range cgroupModes(t) {
		t.Run(mode, func(t *testing.T) {
			ws := newWorkspace(t, local.Config{Cgroups: mode, Exec: execconf.Exec{KillGrace: 200 * time.Millisecond}})
			res, err := ws.Exec(context.Background(), opsapi.ExecRequest{
				Command: `sleep 600 >/dev/null 2>&1 & echo $! > bg.pid; sleep 601 >/dev/null 2>&1 & echo $! > bg2.pid`,
				Timeout: 10 * time.Second,
			})
			if err != nil || res.ExitCode != 0 || res.TimedOut {
				t.Fatalf("Exec = %+v, %v", res, err)
			}
			bg, bg2 := readPid(t, ws, "bg.pid"), readPid(t, ws, "bg2.pid")
			if !alive(bg) || !alive(bg2) {
				t.Fatal("the background children died with the command (pi keeps them)")
			}
			// The command may return while a child is still inside
			// execve, whose command line reads empty for that moment:
			// look again until both show theirs.
			var ps []opsapi.Process
			found := map[int]string{}
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				ps, err = ws.Processes(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				clear(found)
				for _, p := range ps {
					found[p.PID] = p.Command
				}
				if strings.Contains(found[bg], "sleep 600") && strings.Contains(found[bg2], "sleep 601") {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("Processes = %+v, want %d and %d", ps, bg, bg2)
				}
			}
			// A pid that is not the workspace's is refused, and nothing dies.
			if _, err := ws.KillProcesses(context.Background(), []int{bg, os.Getpid()}); !errors.Is(err, opsapi.ErrNotExist) {
				t.Fatalf("killing a foreign pid: %v, want ErrNotExist", err)
			}
			if !alive(bg) {
				t.Fatal("a refused kill killed something")
			}
			if n, err := ws.KillProcesses(context.Background(), []int{bg}); err != nil || n != 1 {
				t.Fatalf("KillProcesses(bg) = %d, %v", n, err)
			}
			waitGone(t, bg)
			if !alive(bg2) {
				t.Fatal("killing one process killed another")
			}
			// Destroy kills the rest.
			if err := ws.Destroy(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitGone(t, bg2)
		})
	}
}

func TestRestartKillsWhatThePreviousRunLeft(t *testing.T) {
	for _, mode := range cgroupModes(t) {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cfg := local.Config{StateDir: dir, Cgroups: mode, Exec: execconf.Exec{KillGrace: 200 * time.Millisecond}}
			ws := newWorkspace(t, cfg)
			if _, err := ws.Exec(context.Background(), opsapi.ExecRequest{
				Command: `(setsid sleep 600 >/dev/null 2>&1 & echo $! > bg.pid) `,
				Timeout: 10 * time.Second,
			}); err != nil {
				t.Fatal(err)
			}
			bg := readPid(t, ws, "bg.pid")
			if !alive(bg) {
				t.Fatal("the background child is gone already")
			}
			// A new backend on the same state dir is the restarted broker.
			b, err := local.New(cfg, testutil.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			waitGone(t, bg)
			// The workspace itself survives the restart.
			all, err := b.List(context.Background())
			if err != nil || all["w"] == nil {
				t.Fatalf("List after restart = %v, %v", all, err)
			}
		})
	}
}

func TestMemoryLimitOOMIsReported(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	b, err := local.New(local.Config{StateDir: dir}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opts, _ := json.Marshal(map[string]any{"limits": map[string]any{"memoryBytes": 64 << 20}})
	w, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: "oom", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	ws := w.(*local.Workspace)
	defer func() { _ = ws.Destroy(context.Background()) }()
	res, err := ws.Exec(context.Background(), opsapi.ExecRequest{
		Command: `s=x; while :; do s="$s$s"; done`,
		Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.MemoryLimit == 0 {
		testutil.SkipOrFail(t, "no memory controller on this host")
	}
	if !res.OOMKilled || res.MemoryLimit != 64<<20 || res.TimedOut {
		t.Fatalf("result %+v, want OOMKilled with MemoryLimit 64 MiB", res)
	}
	// The workspace still works afterwards.
	res, err = ws.Exec(context.Background(), opsapi.ExecRequest{Command: "true"})
	if err != nil || res.ExitCode != 0 || res.OOMKilled {
		t.Fatalf("next command = %+v, %v", res, err)
	}
}

func TestLimitsWithoutCgroupsAreRefused(t *testing.T) {
	b, err := local.New(local.Config{StateDir: t.TempDir(), Cgroups: "off"}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(context.Background(), opsapi.WorkspaceSpec{ID: "x", Options: json.RawMessage(`{"limits":{"pids":10}}`)})
	if !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("limits without cgroups: %v, want ErrInvalid", err)
	}
	if _, err := local.New(local.Config{StateDir: t.TempDir(), Cgroups: "v3"}, nil); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("cgroups v3: %v", err)
	}
}

// TestLimitsSurviveLosingTheCgroup: after a reboot the cgroups are gone;
// the restarted backend makes the workspace's group again with the
// limits it was created with.
func TestLimitsSurviveLosingTheCgroup(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	cfg := local.Config{StateDir: dir}
	b, err := local.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: "w", Options: json.RawMessage(`{"limits":{"pids":77}}`)})
	if err != nil {
		t.Fatal(err)
	}
	ws := w.(*local.Workspace)
	// The command's own group is <workspace group>/cmd-...; its parent
	// is the workspace's, in the pids hierarchy (v1) or the unified one.
	groupDir := func(ws *local.Workspace) string {
		out := sh(t, ws, "cat /proc/self/cgroup")
		for _, line := range strings.Split(out, "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) == 3 && f[1] == "pids" {
				return filepath.Join("/sys/fs/cgroup/pids", filepath.Dir(f[2]))
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				return filepath.Join("/sys/fs/cgroup", filepath.Dir(p))
			}
		}
		t.Fatalf("no cgroup in %q", out)
		return ""
	}
	g := groupDir(ws)
	if b, err := os.ReadFile(filepath.Join(g, "pids.max")); err != nil || strings.TrimSpace(string(b)) != "77" {
		testutil.SkipOrFail(t, "no pids limit in "+g+": "+string(b))
	}
	// The reboot: every group of the workspace is gone.
	for _, ctrl := range []string{"freezer", "pids", "memory", "cpu", ""} {
		_ = syscall.Rmdir(filepath.Join("/sys/fs/cgroup", ctrl, strings.TrimPrefix(g, "/sys/fs/cgroup/pids")))
	}
	if _, err := os.Stat(g); err == nil {
		t.Fatalf("%s is still there", g)
	}
	b2, err := local.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	all, err := b2.List(context.Background())
	if err != nil || all["w"] == nil {
		t.Fatalf("List = %v, %v", all, err)
	}
	ws2 := all["w"].(*local.Workspace)
	defer func() { _ = ws2.Destroy(context.Background()) }()
	if got, err := os.ReadFile(filepath.Join(groupDir(ws2), "pids.max")); err != nil || strings.TrimSpace(string(got)) != "77" {
		t.Fatalf("pids.max after the restart = %q, %v; want 77", got, err)
	}
}

// TestCloseRemovesEmptyGroupsAndExecMakesThemAgain: a closed backend
// leaves no empty cgroup behind, and a later command in one of its
// workspaces gets its group back, limits included.
func TestCloseRemovesEmptyGroupsAndExecMakesThemAgain(t *testing.T) {
	testutil.RequireRoot(t)
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: "w", Options: json.RawMessage(`{"limits":{"pids":55}}`)})
	if err != nil {
		t.Fatal(err)
	}
	ws := w.(*local.Workspace)
	defer func() { _ = ws.Destroy(context.Background()) }()
	cg := sh(t, ws, "cat /proc/self/cgroup")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	var dir string
	for _, line := range strings.Split(cg, "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && (f[1] == "pids" || f[0] == "0" && dir == "") {
			root := "/sys/fs/cgroup/pids"
			if f[1] != "pids" {
				root = "/sys/fs/cgroup"
			}
			dir = filepath.Join(root, filepath.Dir(f[2]))
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s survived Close", dir)
	}
	if out := sh(t, ws, "cat "+filepath.Join(dir, "pids.max")); strings.TrimSpace(out) != "55" {
		t.Fatalf("pids.max after the group came back = %q", out)
	}
}
