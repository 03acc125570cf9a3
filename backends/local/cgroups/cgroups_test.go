//go:build linux

package cgroups

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cgv3 "github.com/containerd/cgroups/v3"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/killtree"
)

// modes are the hierarchies this host can test: the one auto-detection
// picks, and v2 also where a hybrid host mounts it beside v1 (without
// controllers there, so only placement and the kill are tested on it).
func modes(t *testing.T) []Mode {
	testutil.RequireRoot(t)
	out := []Mode{Auto}
	if cgv3.Mode() == cgv3.Hybrid {
		out = append(out, V2)
	}
	return out
}

func openCgroups(t *testing.T, mode Mode) *Base {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	c, err := Open(Config{Name: "cgroups-test-" + hex.EncodeToString(b), Mode: mode})
	if err != nil {
		testutil.SkipOrFail(t, "cgroups unavailable: "+err.Error())
	}
	t.Cleanup(func() {
		for _, n := range must(c.Children()) {
			g := &Group{c: c, rel: filepath.Join(c.base, n)}
			if err := g.Delete(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		if err := c.Remove(); err != nil {
			t.Errorf("removing the base: %v", err)
		}
		if _, err := os.Stat(c.Path()); err == nil {
			t.Errorf("base group %s left behind", c.Path())
		}
	})
	return c
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// wait reaps cmd, failing (and killing it) if it has not ended within 10 s.
func wait(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatal("the command was still running 10 s after the kill")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// startIn runs script under bash inside g, in its own process group.
func startIn(t *testing.T, g *Group, script string) *exec.Cmd {
	t.Helper()
	bash := testutil.RequireCommand(t, "bash")
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	killtree.Prepare(cmd)
	entry, err := g.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	entry.Release()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = g.Kill()
		wait(t, cmd)
	})
	return cmd
}

func forEachMode(t *testing.T, f func(t *testing.T, c *Base)) {
	for _, m := range modes(t) {
		t.Run(m.String(), func(t *testing.T) { f(t, openCgroups(t, m)) })
	}
}

func TestCgroupEscapesDieWithTheGroup(t *testing.T) {
	testutil.RequireCommand(t, "setsid")
	forEachMode(t, func(t *testing.T, c *Base) {
		ws := must(c.Group("ws", Limits{}))
		cmdg := must(ws.Child("cmd", Limits{}))
		// A setsid'ed sleep with a cleared environment leaves both the
		// process group and any marker; a double fork reparents to init.
		cmd := startIn(t, cmdg, `setsid env -i sleep 600 & (setsid sh -c 'sleep 600 & sleep 600 &' &); exec sleep 600`)
		// Four sleeps, not four processes: the shells that start them
		// come and go on the way, and a count caught then is not the
		// set the kill finds.
		waitFor(t, "four sleeps in the group", func() bool {
			ps := must(cmdg.Procs())
			for _, p := range ps {
				if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); string(comm) != "sleep\n" {
					return false
				}
			}
			return len(ps) == 4
		})
		procs := must(cmdg.Procs())
		if !slices.Contains(procs, cmd.Process.Pid) {
			t.Fatalf("the command %d is not in its group %v", cmd.Process.Pid, procs)
		}
		// The workspace group sees its commands' processes.
		if n := len(must(ws.Procs())); n != 4 {
			t.Errorf("workspace group lists %d processes, want 4", n)
		}
		killed, err := cmdg.KillAll(cmd.Process.Pid, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if killed != 4 {
			t.Errorf("killed = %d, want 4", killed)
		}
		wait(t, cmd)
		for _, p := range procs {
			if killtree.Alive(p) {
				t.Errorf("process %d survived the kill", p)
			}
		}
		if err := ws.Delete(); err != nil {
			t.Fatal(err)
		}
		if ws.Exists() {
			t.Error("the workspace group is still there after Delete")
		}
	})
}

func TestCgroupChildIsInsideBeforeItRuns(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *Base) {
		g := must(c.Group("ws", Limits{}))
		// The first thing the command does is report its own cgroup:
		// it must already be g.
		bash := testutil.RequireCommand(t, "bash")
		cmd := exec.Command(bash, "-c", "cat /proc/self/cgroup")
		entry, err := g.Prepare(cmd)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.Output()
		entry.Release()
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimPrefix(g.rel, "")
		if !strings.Contains(string(out), want+"\n") {
			t.Fatalf("/proc/self/cgroup = %q, want a line ending in %s", out, want)
		}
	})
}

// TestCgroupEntryIgnoresLoaderVariables: on v1 a shell puts itself in the
// group before it execs the command; it must not start with the caller's
// loader variables, or a preloaded library could fork before the entry
// and leave a process outside the group. LD_DEBUG shows which programs
// the loader saw the variable in: only the command, which still gets
// every variable, unchanged.
func TestCgroupEntryIgnoresLoaderVariables(t *testing.T) {
	bash := testutil.RequireCommand(t, "bash")
	printenv := testutil.RequireCommand(t, "printenv")
	forEachMode(t, func(t *testing.T, c *Base) {
		// Both v1 entries: bash's own, and /bin/sh's (POSIXLY_CORRECT
		// makes bash skip BASH_ENV).
		for _, extra := range []string{"X=1", "POSIXLY_CORRECT=1"} {
			testLoaderVariables(t, c, bash, printenv, extra)
		}
	})
}

func testLoaderVariables(t *testing.T, c *Base, bash, printenv, extra string) {
	g := must(c.Group("ws", Limits{}))
	cmd := exec.Command(bash, "-c", `exec printenv LD_DEBUG TMPDIR LD_x`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LD_DEBUG=files", "TMPDIR=/tmp/a b", "LD_x=1", "LD-odd=2", extra}
	entry, err := g.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	entry.Release()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if got, want := stdout.String(), "files\n/tmp/a b\n1\n"; got != want {
		t.Errorf("the command saw %q, want %q", got, want)
	}
	var programs []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if _, prog, ok := strings.Cut(line, "needed by "); ok {
			programs = append(programs, strings.Fields(prog)[0])
		}
	}
	if len(programs) == 0 {
		t.Fatalf("no loader output at all: %q", stderr.String())
	}
	sawCommand := false
	for _, p := range programs {
		switch filepath.Base(p) {
		case "sh", "dash":
			t.Errorf("the loader ran the entry shell %s with the caller's LD_DEBUG", p)
		case filepath.Base(printenv):
			sawCommand = true
		}
	}
	if !sawCommand {
		t.Errorf("the command's %s did not get LD_DEBUG (the loader ran %v)", printenv, programs)
	}
}

// TestCgroupPreloadedLibraryForksInside: a library preloaded through the
// request's LD_PRELOAD forks from its constructor, before any code of the
// program it is loaded into; on v1 the child landed in the root cgroups
// when the entry shell itself started with LD_PRELOAD. It must be in the
// command's group, and die with it. Needs a C compiler (cc).
func TestCgroupPreloadedLibraryForksInside(t *testing.T) {
	bash := testutil.RequireCommand(t, "bash")
	cc := testutil.RequireCommand(t, "cc")
	lib := filepath.Join(t.TempDir(), "forkonload.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/forkonload.c").CombinedOutput(); err != nil {
		t.Fatalf("building the library: %v\n%s", err, out)
	}
	forEachMode(t, func(t *testing.T, c *Base) {
		for i, extra := range []string{"X=1", "POSIXLY_CORRECT=1"} { // bash's entry, and /bin/sh's
			g := must(c.Group(fmt.Sprintf("ws%d", i), Limits{}))
			out := filepath.Join(t.TempDir(), "cgroups")
			cmd := exec.Command(bash, "-c", "/bin/true")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LD_PRELOAD=" + lib, "FORKONLOAD_OUT=" + out, extra}
			entry := must(g.Prepare(cmd))
			err := cmd.Run()
			entry.Release()
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the forked child's report", func() bool { _, err := os.Stat(out); return err == nil })
			report := string(must(os.ReadFile(out)))
			ours := map[string]bool{}
			for _, n := range c.v1 {
				ours[string(n)] = true
			}
			for _, line := range strings.Split(strings.TrimSpace(report), "\n") {
				f := strings.SplitN(line, ":", 3)
				if len(f) != 3 {
					continue
				}
				mine := c.mode == V2 && f[0] == "0"
				for _, ctrl := range strings.Split(f[1], ",") {
					mine = mine || c.mode != V2 && ours[ctrl]
				}
				if mine && !strings.HasSuffix(f[2], g.rel) {
					t.Errorf("%s: the preloaded library's child is in %s, outside %s", extra, line, g.rel)
				}
			}
			procs := must(g.Procs())
			if len(procs) == 0 {
				t.Fatalf("%s: the group is empty; the child's sleep should be in it", extra)
			}
			if _, err := g.Kill(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the child to die with the group", func() bool {
				return !slices.ContainsFunc(procs, killtree.Alive)
			})
		}
	})
}

// TestCgroupBashEntry: on v1 a `bash -c` command enters its group through
// BASH_ENV, run from a pipe before the command; the command sees neither
// BASH_ENV nor the pipe, exits 126 without running when the entry fails,
// and whatever would make bash skip BASH_ENV or import code before it
// takes the /bin/sh entry instead.
func TestCgroupBashEntry(t *testing.T) {
	bash := testutil.RequireCommand(t, "bash")
	mode := modes(t)[0]
	if mode == V2 {
		t.Skip("v2 clones straight into the group; there is no entry")
	}
	c := openCgroups(t, mode)
	g := must(c.Group("ws", Limits{}))
	run := func(t *testing.T, g *Group, env []string, script string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bash, "-c", script)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		e, err := g.Prepare(cmd)
		if err != nil {
			t.Fatal(err)
		}
		entry := cmd.Path
		out, err := cmd.Output()
		e.Release()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return entry, string(out), cmd.ProcessState.ExitCode()
	}
	t.Run("clean", func(t *testing.T) {
		entry, out, code := run(t, g, []string{"LD_x=1"},
			`test -z "${BASH_ENV+set}" && ! { true <&3; } 2>/dev/null && echo "$LD_x" && cat /proc/self/cgroup`)
		if entry != bash || code != 0 {
			t.Fatalf("entry %s, exit %d, want %s and 0", entry, code, bash)
		}
		if !strings.HasPrefix(out, "1\n") || !strings.Contains(out, g.rel+"\n") {
			t.Fatalf("output %q: want the restored LD_x, then a cgroup line ending in %s", out, g.rel)
		}
	})
	t.Run("entry fails", func(t *testing.T) {
		gone := must(g.Child("gone", Limits{}))
		cmd := exec.Command(bash, "-c", "echo ran")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		entry := must(gone.Prepare(cmd))
		if err := gone.Delete(); err != nil {
			t.Fatal(err)
		}
		out, err := cmd.Output()
		entry.Release()
		if cmd.Path != bash || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 126 || len(out) > 0 {
			t.Fatalf("entry %s: exit %v, output %q, %v; want 126 and nothing run", cmd.Path, cmd.ProcessState, out, err)
		}
	})
	for _, env := range [][]string{
		{"BASH_FUNC_f%%=() {  echo f;\n}"},
		{"POSIXLY_CORRECT=1"},
		{"SHELLOPTS=errexit"},
		{"BASH_ENV=/dev/null"},
		{"f=() { echo f; }"},
	} {
		t.Run(env[0][:strings.IndexByte(env[0], '=')], func(t *testing.T) {
			entry, out, code := run(t, g, env, `cat /proc/self/cgroup`)
			if entry != "/bin/sh" || code != 0 || !strings.Contains(out, g.rel+"\n") {
				t.Fatalf("entry %s, exit %d, output %q; want /bin/sh, 0 and the group", entry, code, out)
			}
		})
	}
}

func TestCgroupSIGTERMIgnoredIsKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *Base) {
		g := must(c.Group("ws", Limits{}))
		cmd := startIn(t, g, `trap '' TERM; setsid sleep 600 & sleep 600`)
		waitFor(t, "three processes", func() bool { return len(must(g.Procs())) == 3 })
		begin := time.Now()
		if _, err := g.KillAll(cmd.Process.Pid, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took < 300*time.Millisecond {
			t.Errorf("returned after %v, before the grace", took)
		}
		wait(t, cmd)
		if !g.Empty() {
			t.Errorf("left: %v", must(g.Procs()))
		}
	})
}

func TestCgroupPidsLimit(t *testing.T) {
	c := openCgroups(t, Auto)
	if slices.Contains(c.Missing(Limits{Pids: 1}), "pids") {
		testutil.SkipOrFail(t, "no pids controller")
	}
	g := must(c.Group("ws", Limits{Pids: 20}))
	cmd := startIn(t, g, `n=0; for i in $(seq 100); do sleep 600 2>/dev/null & done; sleep 600`)
	waitFor(t, "the group at its cap", func() bool { return len(must(g.Procs())) >= 15 })
	time.Sleep(200 * time.Millisecond)
	if n := len(must(g.Procs())); n > 20 {
		t.Errorf("%d processes in a group capped at 20", n)
	}
	if _, err := g.KillAll(cmd.Process.Pid, 0); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupOOMKillIsCounted(t *testing.T) {
	c := openCgroups(t, Auto)
	if slices.Contains(c.Missing(Limits{MemoryBytes: 1 << 20}), "memory") {
		testutil.SkipOrFail(t, "no memory controller")
	}
	ws := must(c.Group("ws", Limits{MemoryBytes: 64 << 20}))
	g := must(ws.Child("cmd", Limits{}))
	if got := g.MemoryLimit(); got != 64<<20 {
		t.Errorf("MemoryLimit = %d, want the workspace's %d", got, 64<<20)
	}
	// A string that doubles until it is far past the limit.
	cmd := startIn(t, g, `s=x; while :; do s="$s$s"; done`)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the hog ended with %v, want killed", err)
	}
	if n := g.OOMKills(); n == 0 {
		t.Errorf("OOMKills = 0 after the hog was killed (%v)", err)
	}
}

func TestCgroupLimitsAreWritten(t *testing.T) {
	c := openCgroups(t, Auto)
	l := Limits{MemoryBytes: 128 << 20, Pids: 77, CPU: 0.5}
	if m := c.Missing(l); len(m) > 0 {
		testutil.SkipOrFail(t, "missing controllers "+strings.Join(m, ","))
	}
	g := must(c.Group("ws", l))
	read := func(ctrl, file string) string {
		p := filepath.Join(c.v2Mount, g.rel, file)
		if c.mode == V1 {
			p = filepath.Join(c.v1Mount, ctrl, g.rel, file)
		}
		return strings.TrimSpace(string(must(os.ReadFile(p))))
	}
	if c.mode == V1 {
		if got := read("pids", "pids.max"); got != "77" {
			t.Errorf("pids.max = %s", got)
		}
		if got := read("memory", "memory.limit_in_bytes"); got != strconv.Itoa(128<<20) {
			t.Errorf("memory.limit_in_bytes = %s", got)
		}
		if got := read("cpu", "cpu.cfs_quota_us"); got != "50000" {
			t.Errorf("cpu.cfs_quota_us = %s", got)
		}
		return
	}
	if got := read("", "pids.max"); got != "77" {
		t.Errorf("pids.max = %s", got)
	}
	if got := read("", "memory.max"); got != strconv.Itoa(128<<20) {
		t.Errorf("memory.max = %s", got)
	}
	if got := read("", "cpu.max"); got != "50000 100000" {
		t.Errorf("cpu.max = %s", got)
	}
}

func TestOpenRejectsBadNames(t *testing.T) {
	for _, n := range []string{"", ".", "..", "a/b"} {
		if _, err := Open(Config{Name: n}); err == nil {
			t.Errorf("name %q accepted", n)
		}
	}
	if err := (Limits{MemoryBytes: -1}).Validate(); err == nil {
		t.Error("negative memory accepted")
	}
	if got := (Limits{Pids: 5}).Merge(Limits{Pids: 9, CPU: 1}); got != (Limits{Pids: 5, CPU: 1}) {
		t.Errorf("Merge = %+v", got)
	}
}

// TestEntryWaitReturnsWithTheCommandInItsGroup: once a started
// command's Entry.Wait has returned, the command is in its group, however
// it entered (born there on v2, bash's entry, /bin/sh's). Wait's time
// bound is taken away: it returns because the entry said so, not the
// command (which goes on) nor the clock.
func TestEntryWaitReturnsWithTheCommandInItsGroup(t *testing.T) {
	bash := testutil.RequireCommand(t, "bash")
	bound := maxEntryWait
	maxEntryWait = time.Hour
	t.Cleanup(func() { maxEntryWait = bound })
	forEachMode(t, func(t *testing.T, c *Base) {
		g := must(must(c.Group("ws", Limits{})).Child("cmd", Limits{}))
		for _, env := range [][]string{nil, {"BASH_X=1"}} {
			cmd := sleeper(bash, env)
			entry := must(g.Prepare(cmd))
			if err := cmd.Start(); err != nil {
				entry.Release()
				t.Fatal(err)
			}
			waited := make(chan struct{})
			go func() { entry.Wait(); close(waited) }()
			select {
			case <-waited:
			case <-time.After(10 * time.Second):
				t.Fatal("Wait still waiting 10 s on")
			}
			entry.Release()
			// The process's own view: on a hybrid host's v2 hierarchy the
			// group's cgroup.procs can read empty.
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid)); err != nil || !strings.Contains(string(b), "/ws/cmd\n") {
				t.Errorf("the command (env %q) is not in its group once its entry's Wait returned: %s %v", env, b, err)
			}
			_, _ = g.Kill()
			wait(t, cmd)
		}
	})
}

// sleeper is a `bash -c` command in a process group of its own that
// runs for 30 s, with env beside PATH (a BASH_ variable makes the entry
// /bin/sh's).
func sleeper(bash string, env []string) *exec.Cmd {
	cmd := exec.Command(bash, "-c", "read -r _ </proc/self/status; sleep 30")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	killtree.Prepare(cmd)
	return cmd
}

// TestPrepareEntryAsAnotherUser: a command that drops to an unprivileged
// uid before exec (as the local sandbox's do) still starts inside its
// group, through the descriptors PrepareEntry opened, by bash's entry and
// by /bin/sh's (a BASH_ variable in its environment).
func TestPrepareEntryAsAnotherUser(t *testing.T) {
	bash := testutil.RequireCommand(t, "bash")
	forEachMode(t, func(t *testing.T, c *Base) {
		g := must(must(c.Group("ws", Limits{})).Child("cmd", Limits{}))
		for _, env := range [][]string{nil, {"BASH_X=1"}} {
			cmd := sleeper(bash, env)
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
			entry, err := g.PrepareEntry(cmd)
			if err != nil {
				t.Fatal(err)
			}
			err = cmd.Start()
			if err == nil {
				entry.Wait()
			}
			entry.Release()
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, fmt.Sprintf("the command (env %q) in its group", env), func() bool {
				return slices.Contains(must(g.Procs()), cmd.Process.Pid)
			})
			_, _ = g.Kill()
			wait(t, cmd)
		}
	})
}

// TestEntryWaitGivesUpAtItsBound: a child that holds the entry's pipe and
// never closes it (no entry shell) keeps Wait only until maxEntryWait.
func TestEntryWaitGivesUpAtItsBound(t *testing.T) {
	bound := maxEntryWait
	maxEntryWait = 100 * time.Millisecond
	t.Cleanup(func() { maxEntryWait = bound })
	cmd := exec.Command("sleep", "30")
	e := &Entry{}
	if _, err := e.enteredPipe(cmd); err != nil {
		t.Fatal(err)
	}
	defer e.Release()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waited := make(chan struct{})
	go func() { e.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still waiting 10 s on, past its 100 ms bound (the command runs 30 s)")
	}
}
