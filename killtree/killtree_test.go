//go:build linux

package killtree

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// start runs script under bash in its own group with extra environment,
// and registers a last-resort cleanup.
func start(t *testing.T, script string, env ...string) *exec.Cmd {
	t.Helper()
	bash := testutil.RequireCommand(t, "bash")
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	Prepare(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		wait(t, cmd)
	})
	return cmd
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

func marker(t *testing.T) string {
	b := make([]byte, 8)
	rand.Read(b)
	return "KILLTREE_TEST=" + hex.EncodeToString(b)
}

// markedPids lists the processes carrying marker.
func markedPids(t *testing.T, marker string) []int {
	t.Helper()
	ps, err := procs()
	if err != nil {
		t.Fatal(err)
	}
	m := &markedSet{marker: []byte(marker)}
	var out []int
	for _, p := range ps {
		if !p.zombie && m.carries(p.pid) {
			out = append(out, p.pid)
		}
	}
	return out
}

func TestKillsGrandchildren(t *testing.T) {
	cmd := start(t, "sleep 600 & sleep 600 & wait")
	pgid := cmd.Process.Pid
	waitFor(t, "bash and two sleeps", func() bool { n, _ := GroupMembers(pgid); return n == 3 })
	members, _ := GroupPids(pgid)

	killed, err := KillGroup(pgid, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if killed != 3 {
		t.Errorf("killed = %d, want 3", killed)
	}
	wait(t, cmd)
	waitFor(t, "every member gone", func() bool {
		return !slices.ContainsFunc(members, Alive)
	})
	if n, _ := GroupMembers(pgid); n != 0 {
		t.Errorf("group still has %d members", n)
	}
}

func TestSIGTERMIgnoredEscalatesToSIGKILL(t *testing.T) {
	// An ignored signal stays ignored across exec, so sleep ignores
	// SIGTERM too.
	cmd := start(t, "trap '' TERM; sleep 600 & sleep 600")
	pgid := cmd.Process.Pid
	waitFor(t, "both processes", func() bool { n, _ := GroupMembers(pgid); return n == 3 || n == 2 })
	members, _ := GroupPids(pgid)

	grace := 300 * time.Millisecond
	begin := time.Now()
	if _, err := KillGroup(pgid, grace); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < grace {
		t.Errorf("returned after %v, before the %v grace: SIGKILL came too early", took, grace)
	}
	wait(t, cmd)
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("bash ended with %v, want killed by SIGKILL", cmd.ProcessState)
	}
	waitFor(t, "every member gone", func() bool { return !slices.ContainsFunc(members, Alive) })
}

func TestGroupAlreadyGoneIsSuccess(t *testing.T) {
	cmd := start(t, "exit 0")
	wait(t, cmd)
	killed, err := KillGroup(cmd.Process.Pid, time.Second)
	if err != nil || killed != 0 {
		t.Fatalf("KillGroup on a finished group = %d, %v; want 0, nil", killed, err)
	}
	// ESRCH from kill(2) must be recognised through errors.Is.
	if err := SignalGroup(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesOwnGroup(t *testing.T) {
	if _, err := KillGroup(syscall.Getpgrp(), 0); err == nil {
		t.Fatal("KillGroup of the caller's own group succeeded")
	}
	if _, err := KillGroup(1, 0); err == nil {
		t.Fatal("KillGroup(1) succeeded")
	}
}

func TestKillMarkedCatchesSetsidEscape(t *testing.T) {
	testutil.RequireCommand(t, "setsid")
	mk := marker(t)
	cmd := start(t, "setsid sleep 600 & sleep 600", mk)
	pgid := cmd.Process.Pid
	var escaped int
	waitFor(t, "the setsid'ed sleep", func() bool {
		for _, p := range markedPids(t, mk) {
			if st, ok := readStat(p); ok && st.pgid != pgid {
				escaped = p
				return true
			}
		}
		return false
	})
	t.Cleanup(func() { _ = syscall.Kill(escaped, syscall.SIGKILL) })

	if _, err := KillGroup(pgid, time.Second); err != nil {
		t.Fatal(err)
	}
	wait(t, cmd)
	if !Alive(escaped) {
		t.Fatal("the setsid'ed process died with the group; the test does not exercise an escape")
	}

	killed, err := KillMarked(mk, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if killed < 1 {
		t.Errorf("KillMarked killed %d, want >= 1", killed)
	}
	waitFor(t, "the escaped process gone", func() bool { return !Alive(escaped) })
	if left := markedPids(t, mk); len(left) != 0 {
		t.Errorf("marked processes left: %v", left)
	}
}

func TestKillAllOneGrace(t *testing.T) {
	testutil.RequireCommand(t, "setsid")
	mk := marker(t)
	// Both the group and the escaped process ignore SIGTERM, so both
	// need the SIGKILL after one shared grace.
	cmd := start(t, "trap '' TERM; setsid sleep 600 & sleep 600", mk)
	pgid := cmd.Process.Pid
	waitFor(t, "three marked processes", func() bool { return len(markedPids(t, mk)) == 3 || len(markedPids(t, mk)) == 2 })
	waitFor(t, "an escaped one", func() bool {
		for _, p := range markedPids(t, mk) {
			if st, ok := readStat(p); ok && st.pgid != pgid {
				return true
			}
		}
		return false
	})
	killed, err := KillAll(pgid, mk, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if killed < 2 {
		t.Errorf("killed = %d, want >= 2", killed)
	}
	wait(t, cmd)
	waitFor(t, "no marked process", func() bool { return len(markedPids(t, mk)) == 0 })
}

func TestKillMarkedIgnoresOthers(t *testing.T) {
	mine, other := marker(t), marker(t)
	cmd := start(t, "sleep 600", other)
	waitFor(t, "the sleep", func() bool { return len(markedPids(t, other)) == 1 })
	// A marker that is only a prefix of an entry must not match.
	prefix := other[:len(other)-2]
	for _, m := range []string{mine, prefix} {
		if n, err := KillMarked(m, 100*time.Millisecond); err != nil || n != 0 {
			t.Fatalf("KillMarked(%q) = %d, %v; want 0, nil", m, n, err)
		}
	}
	if !Alive(cmd.Process.Pid) {
		t.Fatal("an unmarked process was killed")
	}
	if _, err := KillMarked("", 0); err == nil {
		t.Fatal("an empty marker was accepted")
	}
}

func TestGroupMembersCountsLiveOnly(t *testing.T) {
	cmd := start(t, "sleep 600 & exec sleep 600")
	pgid := cmd.Process.Pid
	waitFor(t, "two sleeps", func() bool { n, _ := GroupMembers(pgid); return n == 2 })
	if n, err := GroupMembers(1 << 30); err != nil || n != 0 {
		t.Fatalf("GroupMembers(unused) = %d, %v", n, err)
	}
	_, _ = KillGroup(pgid, time.Second)
	wait(t, cmd)
	waitFor(t, "empty group", func() bool { n, _ := GroupMembers(pgid); return n == 0 })
}

func TestGroupMarked(t *testing.T) {
	mk := marker(t)
	cmd := start(t, "sleep 600", mk)
	pgid := cmd.Process.Pid
	waitFor(t, "the sleep", func() bool { return len(markedPids(t, mk)) == 1 })
	if ok, err := GroupMarked(pgid, mk); err != nil || !ok {
		t.Fatalf("GroupMarked(own marker) = %v, %v", ok, err)
	}
	if ok, err := GroupMarked(pgid, marker(t)); err != nil || ok {
		t.Fatalf("GroupMarked(other marker) = %v, %v", ok, err)
	}
}

// TestDescendantsOf: the walk goes below the children (a subshell's
// sleep), and ends with them.
func TestDescendantsOf(t *testing.T) {
	cmd := start(t, "(sleep 30; :) & sleep 30 & wait")
	pid := cmd.Process.Pid
	var kids []int
	waitFor(t, "a subshell and two sleeps", func() bool {
		kids, _ = DescendantsOf(pid)
		return len(kids) == 3
	})
	grandchildren := 0
	for _, k := range kids {
		st, ok := readStat(k)
		switch {
		case !ok:
			t.Errorf("descendant %d is gone", k)
		case st.ppid != pid && slices.Contains(kids, st.ppid):
			grandchildren++
		case st.ppid != pid:
			t.Errorf("descendant %d has parent %d, outside the tree", k, st.ppid)
		}
	}
	if grandchildren != 1 {
		t.Errorf("DescendantsOf(%d) = %v: %d grandchildren, want 1", pid, kids, grandchildren)
	}
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	waitFor(t, "no descendant left", func() bool { kids, _ = DescendantsOf(pid); return len(kids) == 0 })
	wait(t, cmd)
	if kids, err := DescendantsOf(1 << 30); err != nil || len(kids) != 0 {
		t.Errorf("DescendantsOf(unused) = %v, %v", kids, err)
	}
}
