package backendtest

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// exec covers Exec: exit statuses, output, environment, working directory,
// and that timeouts and cancellation kill the whole tree.
func (s *suite) exec(t *testing.T) {
	s.execStatusEnv(t)
	s.execErrorsOutput(t)
	s.execKill(t)
	s.execLifecycle(t)
}

// execStatusEnv holds the cases of exit statuses, the environment and the working directory.
func (s *suite) execStatusEnv(t *testing.T) {
	for _, code := range []int{0, 1, 42} {
		t.Run(fmt.Sprintf("Exec_exit_%d_is_reported_as_ExitCode_%d", code, code), func(t *testing.T) {
			ws := s.parallel(t)
			_, res := run(t, ws, fmt.Sprintf("echo hi; exit %d", code))
			eq(t, "exit code", res.ExitCode, code)
			eq(t, "signal", res.Signal, "")
			eq(t, "timed out", res.TimedOut, false)
		})
	}
	t.Run("Exec_kill_-TERM_self_is_143_SIGTERM", func(t *testing.T) {
		ws := s.parallel(t)
		_, res := run(t, ws, "kill -TERM $$; sleep 5")
		eq(t, "exit code", res.ExitCode, 143)
		eq(t, "signal", res.Signal, "SIGTERM")
	})
	t.Run("Exec_kill_-KILL_self_is_137_SIGKILL", func(t *testing.T) {
		ws := s.parallel(t)
		_, res := run(t, ws, "kill -KILL $$; sleep 5")
		eq(t, "exit code", res.ExitCode, 137)
		eq(t, "signal", res.Signal, "SIGKILL")
	})
	t.Run("Exec_stdout_and_stderr_interleave_in_order", func(t *testing.T) {
		ws := s.parallel(t)
		for range 20 {
			out, _ := run(t, ws, "echo a; echo b >&2; echo c; echo d >&2")
			eq(t, "output", out, "a\nb\nc\nd\n")
		}
	})
	t.Run("Exec_Env_pairs_reach_the_command", func(t *testing.T) {
		ws := s.parallel(t)
		var out bytes.Buffer
		_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: `printf '%s|%s' "$K" "$OTHER"`, Env: []string{"K=V", "OTHER=a b=c"}, Output: &out,
		})
		must(t, err)
		eq(t, "output", out.String(), "V|a b=c")
	})
	t.Run("Exec_base_env_has_PATH_and_HOME", func(t *testing.T) {
		ws := s.parallel(t)
		out := sh(t, ws, `test -n "$PATH" && test -n "$HOME" && command -v sh >/dev/null && echo ok`)
		eq(t, "output", out, "ok\n")
	})
	t.Run("Exec_does_not_leak_the_broker_environment", func(t *testing.T) {
		// Not parallel: t.Setenv changes this process's environment.
		name := fmt.Sprintf("BACKENDTEST_SECRET_%d", time.Now().UnixNano())
		t.Setenv(name, "leaked-value")
		t.Setenv("BACKENDTEST_API_KEY", "sk-leaked")
		ws := s.serial(t)
		out := sh(t, ws, "env")
		for _, bad := range []string{name, "leaked-value", "BACKENDTEST_API_KEY", "sk-leaked"} {
			if strings.Contains(out, bad) {
				t.Errorf("command environment contains %q:\n%s", bad, out)
			}
		}
	})
	t.Run("Exec_stdin_is_empty", func(t *testing.T) {
		ws := s.parallel(t)
		out := sh(t, ws, "cat; echo end")
		eq(t, "output", out, "end\n")
	})
	t.Run("Exec_empty_Cwd_is_the_root", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "marker", "")
		eq(t, "ls", sh(t, ws, "ls marker"), "marker\n")
		eq(t, "pwd", sh(t, ws, "pwd"), ws.Root()+"\n")
	})
	t.Run("Exec_relative_and_absolute_Cwd_are_honoured", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "sub/dir"))
		for _, cwd := range []string{"sub/dir", ws.Root() + "/sub/dir"} {
			var out bytes.Buffer
			_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "pwd", Cwd: cwd, Output: &out})
			must(t, err)
			eq(t, "pwd for Cwd "+cwd, out.String(), ws.Root()+"/sub/dir\n")
		}
	})
}

// execErrorsOutput holds the cases of refused requests and of output bytes.
func (s *suite) execErrorsOutput(t *testing.T) {
	t.Run("Exec_missing_Cwd_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "touch ran", Cwd: "no/such/dir"})
		wantKind(t, err, opsapi.ErrNotExist)
		_, err = ws.Stat(ctxOf(t), "ran")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Exec_NUL_in_command_or_env_is_ErrInvalid", func(t *testing.T) {
		ws := s.parallel(t)
		_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "touch ran\x00; echo"})
		wantKind(t, err, opsapi.ErrInvalid)
		_, err = ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "touch ran", Env: []string{"K=a\x00b"}})
		wantKind(t, err, opsapi.ErrInvalid)
		_, err = ws.Stat(ctxOf(t), "ran")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Exec_nil_Output_discards_and_sets_Duration", func(t *testing.T) {
		ws := s.parallel(t)
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "echo discarded; sleep 0.2"})
		must(t, err)
		eq(t, "exit code", res.ExitCode, 0)
		if res.Duration < 200*time.Millisecond {
			t.Errorf("duration = %v, want at least the command's 200ms", res.Duration)
		}
	})
	t.Run("Exec_NUL_and_invalid_UTF8_output_bytes_preserved", func(t *testing.T) {
		ws := s.parallel(t)
		out, _ := run(t, ws, `printf 'a\000b\377\376c\303\050\r\n'`)
		eq(t, "bytes", out, "a\x00b\xff\xfec\xc3\x28\r\n")
	})
	t.Run("Exec_100k_lines_arrive_complete_and_in_order", func(t *testing.T) {
		ws := s.parallel(t)
		var want strings.Builder
		for i := 1; i <= 100_000; i++ {
			want.WriteString(strconv.Itoa(i) + "\n")
		}
		out := sh(t, ws, "seq 100000")
		if out != want.String() {
			t.Fatalf("seq 100000: got %d bytes, want %d", len(out), want.Len())
		}
	})
	t.Run("Exec_concurrent_commands_keep_their_own_output", func(t *testing.T) {
		ws := s.parallel(t)
		var wg sync.WaitGroup
		outs := make([]bytes.Buffer, 8)
		errs := make([]error, 8)
		for i := range outs {
			wg.Go(func() {
				_, errs[i] = ws.Exec(ctxOf(t), opsapi.ExecRequest{
					Command: fmt.Sprintf("for i in $(seq 2000); do echo id-%d; done", i), Output: &outs[i],
				})
			})
		}
		wg.Wait()
		for i := range outs {
			must(t, errs[i])
			if outs[i].String() != strings.Repeat(fmt.Sprintf("id-%d\n", i), 2000) {
				t.Errorf("command %d output mixed or short (%d bytes)", i, outs[i].Len())
			}
		}
	})
}

// execKill holds the cases of killing a command's whole tree on timeout and cancel.
func (s *suite) execKill(t *testing.T) {
	t.Run("Exec_timeout_kills_the_grandchild", func(t *testing.T) {
		ws := s.parallel(t)
		start := time.Now()
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: `(sh -c 'echo $$ > gc.pid; while :; do echo x >> beat; sleep 0.05; done' & wait); echo unreachable`,
			Timeout: time.Second,
		})
		must(t, err)
		eq(t, "timed out", res.TimedOut, true)
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("returned after %v", d)
		}
		if res.ExitCode == 0 {
			t.Errorf("exit code 0 after a timeout")
		}
		if res.Duration < time.Second {
			t.Errorf("duration %v is shorter than the 1s timeout", res.Duration)
		}
		if res.Killed < 1 {
			t.Errorf("Killed = %d after killing a tree of at least three processes", res.Killed)
		}
		wantTreeGone(t, ws, "gc.pid", "beat")
	})
	t.Run("Exec_timeout_escalates_to_SIGKILL_when_TERM_is_ignored", func(t *testing.T) {
		ws := s.parallel(t)
		start := time.Now()
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: `trap '' TERM; sh -c 'echo $$ > gc.pid; while :; do echo x >> beat; sleep 0.05; done' & wait`,
			Timeout: time.Second,
		})
		must(t, err)
		eq(t, "timed out", res.TimedOut, true)
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("returned after %v", d)
		}
		wantTreeGone(t, ws, "gc.pid", "beat")
	})
	t.Run("Exec_timeout_kills_a_setsid_escapee", func(t *testing.T) {
		// security-cases §2: a new session must not outlive the deadline.
		ws := s.parallel(t)
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: `setsid sh -c 'echo $$ > gc.pid; while :; do echo x >> beat; sleep 0.05; done' </dev/null >/dev/null 2>&1 & sleep 30`,
			Timeout: time.Second,
		})
		must(t, err)
		eq(t, "timed out", res.TimedOut, true)
		wantTreeGone(t, ws, "gc.pid", "beat")
	})
	t.Run("Exec_ctx_cancel_kills_the_tree", func(t *testing.T) {
		ws := s.parallel(t)
		ctx, cancel := context.WithCancel(ctxOf(t))
		defer cancel()
		type outcome struct {
			res opsapi.ExecResult
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := ws.Exec(ctx, opsapi.ExecRequest{
				Command: `(sh -c 'echo $$ > gc.pid; while :; do echo x >> beat; sleep 0.05; done' & wait)`,
			})
			done <- outcome{res, err}
		}()
		if !eventually(10*time.Second, func() bool { _, err := ws.Stat(ctxOf(t), "beat"); return err == nil }) {
			t.Fatal("the command never started")
		}
		cancel()
		select {
		case o := <-done:
			must(t, o.err)
			eq(t, "canceled", o.res.Canceled, true)
		case <-time.After(30 * time.Second):
			t.Fatal("Exec did not return within 30s of cancel")
		}
		wantTreeGone(t, ws, "gc.pid", "beat")
	})
}

// execLifecycle holds the cases of Destroy and of output that outlives the command.
func (s *suite) execLifecycle(t *testing.T) {
	t.Run("Exec_with_an_already_canceled_ctx_runs_nothing", func(t *testing.T) {
		ws := s.parallel(t)
		ctx, cancel := context.WithCancel(ctxOf(t))
		cancel()
		res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "touch ran"})
		if err == nil && !res.Canceled {
			t.Errorf("Exec with a canceled ctx = %+v, want an error or Canceled", res)
		}
		_, err = ws.Stat(ctxOf(t), "ran")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Destroy_kills_a_running_command_and_twice_is_not_an_error", func(t *testing.T) {
		ws := s.parallel(t)
		d := capability[opsapi.Destroyer](t, ws)
		done := make(chan error, 1)
		go func() {
			_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "echo started > started; sleep 60"})
			done <- err
		}()
		if !eventually(10*time.Second, func() bool { _, err := ws.Stat(ctxOf(t), "started"); return err == nil }) {
			t.Fatal("the command never started")
		}
		must(t, d.Destroy(ctxOf(t)))
		select {
		case err := <-done: // killed: a result or an error, but no hang
			t.Logf("Exec ended after Destroy with err=%v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("Exec still running 20s after Destroy")
		}
		must(t, d.Destroy(ctxOf(t)))
	})
	t.Run("Exec_background_child_holding_the_pipe_does_not_hang", func(t *testing.T) {
		ws := s.parallel(t)
		start := time.Now()
		out, res := run(t, ws, "sleep 30 & echo $! > bg.pid; echo done")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("returned after %v, want well under 5s", d)
		}
		eq(t, "output", out, "done\n")
		eq(t, "exit code", res.ExitCode, 0)
		run(t, ws, "kill $(cat bg.pid)")
	})
	t.Run("Exec_late_output_from_a_background_subshell_is_captured", func(t *testing.T) {
		// Serial: "late" must come within the 100 ms idle grace. The
		// subshell waits for the command's shell to exit with builtins
		// only: a fork and exec of sleep missed the grace now and then on
		// a loaded machine, and "late" is late by construction this way.
		ws := s.serial(t)
		out, _ := run(t, ws, "(while kill -0 $$ 2>/dev/null; do :; done; echo late) & echo early")
		eq(t, "output", out, "early\nlate\n")
	})
	t.Run("Exec_never_writes_Output_after_returning", func(t *testing.T) {
		ws := s.parallel(t)
		w := &lateWriter{}
		_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "(sleep 0.6; echo too-late) & echo now", Output: w})
		must(t, err)
		w.close()
		time.Sleep(1200 * time.Millisecond)
		eq(t, "output", w.String(), "now\n")
		eq(t, "writes after return", w.late(), 0)
	})
}

// wantTreeGone checks that the process that wrote pidFile, and appends to
// beat every 50 ms, has stopped: beat no longer grows and the pid is gone
// (or a zombie). Both checks go through the workspace, so they hold on any
// backend.
func wantTreeGone(t *testing.T, ws opsapi.Operations, pidFile, beat string) {
	t.Helper()
	size := func() int64 {
		fi, err := ws.Stat(ctxOf(t), beat)
		must(t, err)
		return fi.Size
	}
	if size() == 0 {
		t.Fatal("the process never ran")
	}
	stopped := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		a := size()
		time.Sleep(400 * time.Millisecond)
		if size() == a {
			stopped = true
			break
		}
	}
	if !stopped {
		t.Error("the killed command's descendant is still writing 10s later")
	}
	// One read of the stat file: a process reaped between two looks (a
	// kill -0, then a grep of a file already gone) is not alive.
	out := sh(t, ws, `pid=$(cat `+pidFile+`)
st=$(cat /proc/"$pid"/stat 2>/dev/null) || st=
case "$st" in
"" | *") Z "*) echo gone ;;
*) echo "alive $pid: $st"; kill -KILL "$pid" ;;
esac`)
	eq(t, "descendant", out, "gone\n")
}

// lateWriter records writes that arrive after close.
type lateWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
	after  int
}

func (w *lateWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.after++
	}
	return w.buf.Write(p)
}

func (w *lateWriter) close() { w.mu.Lock(); w.closed = true; w.mu.Unlock() }

func (w *lateWriter) late() int { w.mu.Lock(); defer w.mu.Unlock(); return w.after }

func (w *lateWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
