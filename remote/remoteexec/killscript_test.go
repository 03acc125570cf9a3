package remoteexec_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// TestKillGraceIsWallTime: the kill script's grace is time on the clock,
// however slow each look for survivors is. A busy host is stood in for by
// a grep that takes 200 ms per run (the script runs one per look): counting
// looks as 50 ms each, as the script once did, stretched a 1 s grace to
// 20 looks, over 5 s, and TestLeaderMode's timeout past its bound on a
// loaded machine. The target ignores SIGTERM, so it lives exactly until
// the grace ends.
func TestKillGraceIsWallTime(t *testing.T) {
	realGrep := testutil.RequireCommand(t, "grep")
	testutil.RequireCommand(t, "sleep")
	bin := t.TempDir()
	looks := filepath.Join(t.TempDir(), "looks")
	shim := "#!/bin/sh\necho >>" + remoteexec.Quote(looks) + "\nsleep 0.2\nexec " + remoteexec.Quote(realGrep) + ` "$@"` + "\n"
	if err := os.WriteFile(filepath.Join(bin, "grep"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	slowRun := func(ctx context.Context, argv []string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		return cmd.Output()
	}

	b := make([]byte, 8)
	rand.Read(b)
	marker := "KILLGRACE_TEST=" + hex.EncodeToString(b)
	ready := filepath.Join(t.TempDir(), "ready")
	target := exec.Command("sh", "-c", `trap '' TERM; sleep 600 & echo >"$1"; wait`, "sh", ready)
	target.Env = append(os.Environ(), marker)
	target.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = target.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-target.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the target did not start its sleep")
		}
	}

	const grace = time.Second
	r := remoteexec.New(nil, slowRun, remoteexec.Config{KillGrace: grace}, testutil.Logger(t))
	begin := time.Now()
	n, err := r.KillMarked(t.Context(), marker)
	took := time.Since(begin)
	if err != nil || n < 2 {
		t.Fatalf("KillMarked = %d, %v; want the shell and its sleep", n, err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the target survived the kill")
	}
	if took < grace {
		t.Errorf("the kill took %v, less than its %v grace: SIGKILL came early", took, grace)
	}
	// One look before SIGTERM, at most grace/200ms+1 during the grace,
	// a few while SIGKILL lands; a poll-counted grace looks 20 times.
	raw, _ := os.ReadFile(looks)
	got := strings.Count(string(raw), "\n")
	t.Logf("%d looks, %v", got, took)
	if got > 12 {
		t.Errorf("the script looked for survivors %d times in a %v grace at 200 ms a look (took %v): the grace counts looks, not time", got, grace, took)
	}
}

// TestStuckKillScriptStillSweeps: a kill script that never finishes (near
// a process limit its forks fail and bash's fork retry sleeps for seconds
// at a time) is given up after its grace and a slack, and the builtin-only
// sweep still kills the tree. It used to hold the whole kill's time, so
// nothing was killed and the call reported Killed 0.
func TestStuckKillScriptStillSweeps(t *testing.T) {
	testutil.RequireCommand(t, "setsid")
	testutil.RequireCommand(t, "bash")
	t.Cleanup(remoteexec.SetKillScriptSlack(time.Second))
	stuck := func(ctx context.Context, argv []string) ([]byte, error) {
		if len(argv) > 2 && argv[2] == remoteexec.KillScript {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	}
	tr := &transport{}
	r := remoteexec.New(tr.start, stuck, remoteexec.Config{KillGrace: 200 * time.Millisecond}, testutil.Logger(t))
	dir := t.TempDir()
	start := time.Now()
	res, err := r.Exec(t.Context(), opsapi.ExecRequest{
		Command: `sh -c 'echo $$ > child.pid; exec sleep 600' & sleep 600`,
		Timeout: 300 * time.Millisecond,
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Killed < 2 {
		t.Fatalf("result %+v, want a timeout that killed the shell and its child", res)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the kill took %v", d)
	}
	waitGone(t, filepath.Join(dir, "child.pid"))
}
