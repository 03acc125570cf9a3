package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/procstart"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// fastKill keeps kill tests short: the grace only has to be observable.
var fastKill = local.Config{Exec: execconf.Exec{KillGrace: 200 * time.Millisecond}}

func TestExecTimeoutKillsGrandchildren(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, fastKill)
	_, res := run(t, ws, opsapi.ExecRequest{
		Command: `sleep 600 & a=$!; (sleep 600 & echo $! > b.tmp; wait) &
while [ ! -s b.tmp ]; do sleep 0.01; done
echo "$a $(cat b.tmp)" > pids.tmp && mv pids.tmp pids; sleep 600`,
		Timeout: 3 * time.Second,
	})
	if !res.TimedOut || res.Canceled {
		t.Fatalf("result %+v, want TimedOut", res)
	}
	if res.ExitCode != 143 || res.Signal != "SIGTERM" {
		t.Errorf("exit %d %q, want 143 SIGTERM (bash ended by the group's SIGTERM)", res.ExitCode, res.Signal)
	}
	if res.Killed < 4 {
		t.Errorf("Killed = %d, want >= 4 (bash, subshell, two sleeps)", res.Killed)
	}
	for _, pid := range pids(t, ws, "pids") {
		eventually(t, "grandchild "+pid+" gone", func() bool { return !pidAlive(pid) })
	}
}

func TestExecSIGTERMIgnoredIsKilledAfterGrace(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, fastKill)
	_, res := run(t, ws, opsapi.ExecRequest{
		Command: "trap '' TERM; sleep 600 & echo $! > pid; wait",
		Timeout: 2 * time.Second,
	})
	if !res.TimedOut || res.ExitCode != 137 || res.Signal != "SIGKILL" {
		t.Fatalf("result %+v, want TimedOut, 137, SIGKILL", res)
	}
	pid := pids(t, ws, "pid")[0]
	eventually(t, "the TERM-ignoring sleep gone", func() bool { return !pidAlive(pid) })
}

func TestExecSetsidEscapeKilledOnTimeout(t *testing.T) {
	t.Parallel()
	testutil.RequireCommand(t, "setsid")
	ws := newWorkspace(t, fastKill)
	// setsid leaves the group and the session; a double fork under
	// setsid -f and nohup add the daemon shapes.
	_, res := run(t, ws, opsapi.ExecRequest{
		Command: `setsid sleep 600 & a=$!
setsid -f sh -c 'echo $$ > b.tmp; exec sleep 600'
nohup setsid sleep 600 >/dev/null 2>&1 & c=$!
while [ ! -s b.tmp ]; do sleep 0.01; done
echo "$a $(cat b.tmp) $c" > pids.tmp && mv pids.tmp pids
sleep 600`,
		Timeout: 3 * time.Second,
	})
	if !res.TimedOut {
		t.Fatalf("result %+v, want TimedOut", res)
	}
	escaped := pids(t, ws, "pids")
	if len(escaped) != 3 {
		t.Fatalf("pids = %q, want three", escaped)
	}
	for _, pid := range escaped {
		eventually(t, "escaped "+pid+" gone", func() bool { return !pidAlive(pid) })
	}
	if res.Killed < 4 {
		t.Errorf("Killed = %d, want >= 4", res.Killed)
	}
}

func TestExecBackgroundHolderDoesNotHang(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	begin := time.Now()
	out, res := run(t, ws, opsapi.ExecRequest{Command: "sleep 600 & echo done"})
	// The bound is the behaviour: a silent holder releases the call
	// ~DrainIdle after the shell exits instead of never.
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("took %v with a silent background holder", took)
	}
	if out != "done\n" || res.ExitCode != 0 || res.TimedOut || res.Canceled {
		t.Fatalf("out %q, result %+v", out, res)
	}
}

func TestExecLateOutputIsCaptured(t *testing.T) {
	t.Parallel()
	// A generous idle window so the test does not race the machine's
	// load: late output inside it must be kept.
	ws := newWorkspace(t, local.Config{Exec: execconf.Exec{DrainIdle: 2 * time.Second}})
	out, res := run(t, ws, opsapi.ExecRequest{Command: "(sleep 0.3; echo late; sleep 0.3; echo later) & echo early"})
	if out != "early\nlate\nlater\n" || res.ExitCode != 0 {
		t.Fatalf("out %q, result %+v", out, res)
	}
}

func TestExecMaxDrainCapsAChattyBackground(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{Exec: execconf.Exec{MaxDrain: 500 * time.Millisecond}})
	begin := time.Now()
	out, res := run(t, ws, opsapi.ExecRequest{Command: "(while :; do echo tick; sleep 0.01; done) & echo started"})
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("took %v with a background writer that never stops", took)
	}
	if !strings.Contains(out, "started\n") || !strings.Contains(out, "tick") || res.ExitCode != 0 {
		t.Fatalf("out %q..., result %+v", out[:min(len(out), 40)], res)
	}
	// run's syncBuffer fails the test if a write came after the return.
	time.Sleep(100 * time.Millisecond)
}

func TestExecDeadlineDuringDrainKills(t *testing.T) {
	t.Parallel()
	// A 1 s idle: on a loaded machine the ticks can pause for over 100 ms.
	ws := newWorkspace(t, local.Config{Exec: execconf.Exec{KillGrace: 200 * time.Millisecond, MaxDrain: time.Minute, DrainIdle: time.Second}})
	out, res := run(t, ws, opsapi.ExecRequest{
		Command: "(echo $BASHPID > pid; while :; do echo tick; sleep 0.01; done) & exit 3",
		Timeout: 2 * time.Second,
	})
	if !res.TimedOut || res.ExitCode != 3 {
		t.Fatalf("result %+v, want TimedOut with the shell's own exit code 3", res)
	}
	if !strings.Contains(out, "tick") {
		t.Errorf("late output lost: %q", out)
	}
	pid := pids(t, ws, "pid")[0]
	eventually(t, "the writer gone", func() bool { return !pidAlive(pid) })
}

func TestExecCancel(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, fastKill)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "echo $$ > pid; sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Canceled || res.TimedOut || res.ExitCode != 143 {
		t.Fatalf("result %+v, want Canceled, 143", res)
	}
	// An already-canceled context does not start anything.
	if _, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "touch started"}); !errors.Is(err, opsapi.ErrCanceled) {
		t.Fatalf("Exec with a canceled ctx: %v, want ErrCanceled", err)
	}
	if _, err := ws.Stat(t.Context(), "started"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("the command ran: %v", err)
	}
}

func TestExecExitCodes(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	for _, tc := range []struct {
		cmd    string
		code   int
		signal string
	}{
		{"true", 0, ""},
		{"exit 3", 3, ""},
		{"kill -KILL $$", 137, "SIGKILL"},
		{"kill -TERM $$", 143, "SIGTERM"},
		{"kill -SEGV $$", 139, "SIGSEGV"},
		{"sh -c 'kill -INT $$'; exit $?", 130, ""}, // the child's 128+N reported by bash
	} {
		_, res := run(t, ws, opsapi.ExecRequest{Command: tc.cmd})
		if res.ExitCode != tc.code || res.Signal != tc.signal {
			t.Errorf("%q: exit %d %q, want %d %q", tc.cmd, res.ExitCode, res.Signal, tc.code, tc.signal)
		}
	}
}

func TestExecOutputInterleavedInOrder(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	out, _ := run(t, ws, opsapi.ExecRequest{Command: "echo 1; echo 2 >&2; echo 3; echo 4 >&2"})
	if out != "1\n2\n3\n4\n" {
		t.Fatalf("out %q: stdout and stderr not interleaved in order", out)
	}
	// stdin is /dev/null: a read ends at once.
	out, _ = run(t, ws, opsapi.ExecRequest{Command: "cat; echo end"})
	if out != "end\n" {
		t.Fatalf("out %q", out)
	}
}

func TestExecEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("WSBROKER_TEST_SECRET", "must-not-leak")
	ws := newWorkspace(t, local.Config{})
	out, _ := run(t, ws, opsapi.ExecRequest{Command: "/usr/bin/env", Env: []string{"FOO=bar", "PATH=/custom"}})
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	if strings.Contains(out, "must-not-leak") {
		t.Fatal("the broker's environment leaked into the command")
	}
	for k, want := range map[string]string{"HOME": ws.Root(), "LANG": "C.UTF-8", "TERM": "dumb", "FOO": "bar", "PATH": "/custom"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if len(got["WSBROKER_CALL"]) != 32 || !strings.HasPrefix(got["WSBROKER_WORKSPACE"], "w@") {
		t.Errorf("markers: %q %q", got["WSBROKER_CALL"], got["WSBROKER_WORKSPACE"])
	}
	out2, _ := run(t, ws, opsapi.ExecRequest{Command: "echo $WSBROKER_CALL"})
	if strings.TrimSpace(out2) == got["WSBROKER_CALL"] {
		t.Error("two calls share a call marker")
	}
	for _, env := range [][]string{{"NOEQUALS"}, {"=v"}, {"A=b\x00c"}, {"WSBROKER_CALL=x"}, {"WSBROKER_WORKSPACE=other"}} {
		if _, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true", Env: env}); !errors.Is(err, opsapi.ErrInvalid) {
			t.Errorf("Env %q: %v, want ErrInvalid", env, err)
		}
	}
	if _, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true\x00rm -rf /"}); !errors.Is(err, opsapi.ErrInvalid) {
		t.Errorf("NUL in command: %v, want ErrInvalid", err)
	}
}

func TestExecCwd(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, "mkdir -p sub/deep && ln -s sub/deep inlink && ln -s / outlink && ln -s "+ws.Root()+"/sub abslink && touch file")
	for _, tc := range []struct {
		cwd  string
		want string // pwd -P relative to the root, or an error kind
		kind error
	}{
		{"", ".", nil},
		{"sub", "sub", nil},
		{ws.Root() + "/sub/deep", "sub/deep", nil},
		{"inlink", "sub/deep", nil},
		{"abslink", "sub", nil},
		{"missing", "", opsapi.ErrNotExist},
		{"file", "", opsapi.ErrNotDir},
		{"..", "", opsapi.ErrPermission},
		{"/tmp", "", opsapi.ErrPermission},
		{"outlink", "", opsapi.ErrPermission},
		{"/proc/self/cwd", "", opsapi.ErrPermission},
		{"/proc/self/fd/7", "", opsapi.ErrPermission},
	} {
		out, res, err := func() (string, opsapi.ExecResult, error) {
			out := &syncBuffer{}
			res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "pwd -P", Cwd: tc.cwd, Output: out})
			return out.String(), res, err
		}()
		if tc.kind != nil {
			if !errors.Is(err, tc.kind) {
				t.Errorf("Cwd %q: err %v, want %v", tc.cwd, err, tc.kind)
			}
			continue
		}
		if err != nil || res.ExitCode != 0 {
			t.Errorf("Cwd %q: %v %+v", tc.cwd, err, res)
			continue
		}
		rel, _ := filepath.Rel(ws.Root(), strings.TrimSpace(out))
		if rel != tc.want {
			t.Errorf("Cwd %q: pwd -P = %q, want <root>/%s", tc.cwd, out, tc.want)
		}
	}
}

func TestDestroyKillsLeftovers(t *testing.T) {
	t.Parallel()
	testutil.RequireCommand(t, "setsid")
	ws := newWorkspace(t, fastKill)
	// The command exits normally and leaves three processes: one in its
	// group, one that left it, one that cleared its environment but
	// stayed in the group.
	out, res := run(t, ws, opsapi.ExecRequest{Command: `sleep 600 & a=$!
setsid sleep 600 & b=$!
env -i sleep 600 & c=$!
echo "$a $b $c"`})
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	left := strings.Fields(out)
	for _, pid := range left {
		if !pidAlive(pid) {
			t.Fatalf("%s is not running: pi lets background processes outlive the call", pid)
		}
	}
	root := ws.Root()
	if err := ws.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, pid := range left {
		eventually(t, pid+" gone after Destroy", func() bool { return !pidAlive(pid) })
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("root still exists: %v", err)
	}
	if err := ws.Destroy(t.Context()); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	if _, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true"}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("Exec after Destroy: %v, want ErrNotExist", err)
	}
}

func TestDestroySparesOtherWorkspaces(t *testing.T) {
	t.Parallel()
	// Two backends, one workspace id: markers must still differ.
	a, b := newWorkspace(t, fastKill), newWorkspace(t, fastKill)
	out, _ := run(t, b, opsapi.ExecRequest{Command: "sleep 600 & echo $!"})
	pid := strings.TrimSpace(out)
	if err := a.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !pidAlive(pid) {
		t.Fatal("destroying one workspace killed another's process")
	}
}

// slowOutput is a caller that takes each chunk slowly, as an HTTP client
// reading an exec stream at a few KiB a second does.
type slowOutput struct {
	delay time.Duration
	n     int
}

func (o *slowOutput) Write(p []byte) (int, error) {
	time.Sleep(o.delay)
	o.n += len(p)
	return len(p), nil
}

// What the command wrote before it exited reaches a caller that takes
// longer than MaxDrain to accept what was still in the pipe at the exit
// (it lost its tail before: the cap counted the caller's time).
func TestExecSlowCallerGetsEveryByte(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{Exec: execconf.Exec{DrainIdle: 50 * time.Millisecond, MaxDrain: 100 * time.Millisecond}})
	// What the pipe holds at the exit (up to 64 KiB) takes the caller a
	// few chunks of 150 ms each.
	out := &slowOutput{delay: 150 * time.Millisecond}
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "head -c 300000 /dev/zero; echo end", Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if want := 300000 + len("end\n"); out.n != want || res.ExitCode != 0 {
		t.Fatalf("the caller got %d of %d bytes; result %+v", out.n, want, res)
	}
}

// A command that is slow to start (a fork waits for its child to exec,
// tens of milliseconds on a loaded host) holds up neither the file
// operations of its workspace nor a Destroy's kill of it.
func TestFileOperationsDoNotWaitForAStart(t *testing.T) {
	ws := newWorkspace(t, local.Config{})
	ctx := context.Background()
	if err := ws.WriteFile(ctx, "f", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	started, release, restore := local.HoldStarts()
	defer restore()
	done := make(chan opsapi.ExecResult, 1)
	go func() {
		res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "sleep 30"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-started
	statted := make(chan error, 1)
	go func() {
		_, err := ws.Stat(ctx, "f")
		statted <- err
	}()
	select {
	case err := <-statted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("Stat waited for a command's start")
	}
	// Destroy waits for the start, then kills what it started.
	destroyed := make(chan error, 1)
	go func() { destroyed <- ws.Destroy(ctx) }()
	time.Sleep(50 * time.Millisecond)
	release()
	if err := <-destroyed; err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		// Killed, or never run: a start the kill came before finds
		// its cgroup gone and exits 126.
		if res.ExitCode == 0 {
			t.Errorf("the command ran to its end: %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command started during Destroy is still running")
	}
}

// TestExecForksUnderTheBrokersStartGate: a command's fork waits for a
// slot of procstart's gate, so that starts never take every P of the
// broker at once (see package procstart).
func TestExecForksUnderTheBrokersStartGate(t *testing.T) {
	for _, mode := range []string{"off", "auto"} {
		t.Run("sandbox "+mode, func(t *testing.T) {
			testExecForksUnderTheStartGate(t, newWorkspace(t, local.Config{Sandbox: local.SandboxConfig{Mode: mode}}))
		})
	}
}

func testExecForksUnderTheStartGate(t *testing.T, ws *local.Workspace) {
	release := make(chan struct{})
	var held sync.WaitGroup
	for range procstart.Slots() {
		held.Add(1)
		go func() {
			_ = procstart.Do(func() error {
				held.Done()
				<-release
				return nil
			})
		}()
	}
	held.Wait()
	done := make(chan error, 1)
	go func() {
		_, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true"})
		done <- err
	}()
	select {
	case err := <-done:
		close(release)
		t.Fatalf("the command ran while every start slot was held (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
