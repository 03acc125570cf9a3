package backendtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// stdio covers ExecRequest.Stdin and Signals: input reaches the command
// whole and its end closes the command's stdin, a Stdin that never ends
// holds nothing up, and a signal reaches every process of the tree.
func (s *suite) stdio(t *testing.T) {
	s.stdioStdin(t)
	s.stdioSignals(t)
}

// stdinCase skips t when the transport cannot carry stdin.
func (s *suite) stdinCase(t *testing.T) opsapi.Operations {
	t.Helper()
	if s.o.NoStdin != "" {
		t.Skip(s.o.NoStdin)
	}
	return s.parallel(t)
}

// signalCase skips t when the transport cannot carry signals.
func (s *suite) signalCase(t *testing.T) opsapi.Operations {
	t.Helper()
	if s.o.NoSignals != "" {
		t.Skip(s.o.NoSignals)
	}
	return s.parallel(t)
}

// stdioStdin holds the cases of ExecRequest.Stdin.
func (s *suite) stdioStdin(t *testing.T) {
	t.Run("Exec_Stdin_reaches_cat", func(t *testing.T) {
		ws := s.stdinCase(t)
		in := "line one\nNUL \x00 and \xff\xfe\r\nno newline"
		out, res := runStdin(t, ws, "cat", strings.NewReader(in))
		eq(t, "exit code", res.ExitCode, 0)
		eq(t, "output", out, in)
	})
	t.Run("Exec_Stdin_and_stdout_reopen_by_path", func(t *testing.T) {
		// `cat /dev/stdin`, `tee /dev/stderr`: the pipes must open as the
		// command's user, not only as the descriptors it inherited.
		ws := s.stdinCase(t)
		out, res := runStdin(t, ws, "cat /dev/stdin > /dev/stdout", strings.NewReader("by path\n"))
		eq(t, "exit code", res.ExitCode, 0)
		eq(t, "output", out, "by path\n")
	})
	t.Run("Exec_4MiB_of_Stdin_arrive_whole", func(t *testing.T) {
		ws := s.stdinCase(t)
		data := make([]byte, 4<<20)
		rng := rand.New(rand.NewPCG(4, 20))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		sum := sha256.Sum256(data)
		// HalfReader: the input comes in many short reads, not one write.
		out, res := runStdin(t, ws, "cat > stdin.bin && wc -c < stdin.bin && sha256sum < stdin.bin",
			iotest.HalfReader(bytes.NewReader(data)))
		eq(t, "exit code", res.ExitCode, 0)
		f := strings.Fields(out)
		if len(f) < 2 {
			t.Fatalf("output %q, want the byte count and the hash", out)
		}
		eq(t, "bytes received", f[0], "4194304")
		eq(t, "sha256 of what arrived", f[1], hex.EncodeToString(sum[:]))
	})
	t.Run("Exec_Stdin_EOF_ends_cat_with_exit_0", func(t *testing.T) {
		ws := s.stdinCase(t)
		// The last data comes with io.EOF in one Read.
		out, res := runStdin(t, ws, "cat", iotest.DataErrReader(strings.NewReader("last\n")))
		eq(t, "timed out", res.TimedOut, false)
		eq(t, "exit code", res.ExitCode, 0)
		eq(t, "output", out, "last\n")
	})
	t.Run("Exec_command_ignoring_a_never_ending_Stdin_returns", func(t *testing.T) {
		ws := s.stdinCase(t)
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() })
		var out syncBuffer
		o := execAsync(ctxOf(t), ws, opsapi.ExecRequest{Command: "echo done", Stdin: pr, Output: &out})
		select {
		case r := <-o:
			must(t, r.err)
			eq(t, "exit code", r.res.ExitCode, 0)
			eq(t, "output", out.String(), "done\n")
		case <-time.After(30 * time.Second):
			t.Fatal("Exec still waiting for its Stdin 30s after echo")
		}
	})
	t.Run("Exec_ctx_cancel_kills_cat_on_a_never_ending_Stdin", func(t *testing.T) {
		ws := s.stdinCase(t)
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() })
		ctx, cancel := context.WithCancel(ctxOf(t))
		defer cancel()
		out := &noticeWriter{mark: "ready\n", on: cancel}
		o := execAsync(ctx, ws, opsapi.ExecRequest{Command: "echo ready; exec cat", Stdin: pr, Output: out})
		select {
		case r := <-o:
			must(t, r.err)
			eq(t, "canceled", r.res.Canceled, true)
			if r.res.ExitCode == 0 {
				t.Errorf("exit code 0 after a cancel")
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Exec did not return within 30s of cancel (output %q)", out.String())
		}
	})
}

// stdioSignals holds the cases of ExecRequest.Signals.
func (s *suite) stdioSignals(t *testing.T) {
	t.Run("Exec_SIGINT_reaches_the_shell", func(t *testing.T) {
		ws := s.signalCase(t)
		sigs := make(chan syscall.Signal, 1)
		out := &noticeWriter{mark: "ready\n", on: func() { sigs <- syscall.SIGINT }}
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: `trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.1; done`,
			Output:  out, Signals: sigs, Timeout: 30 * time.Second,
		})
		must(t, err)
		eq(t, "timed out", res.TimedOut, false)
		eq(t, "exit code", res.ExitCode, 3)
		if !strings.Contains(out.String(), "got-int") {
			t.Errorf("output %q lacks the trap's got-int", out.String())
		}
	})
	t.Run("Exec_SIGTERM_reaches_a_setsid_child_with_a_cleared_environment", func(t *testing.T) {
		ws := s.signalCase(t)
		// env -i clears HOME and the backend's markers: the paths are
		// written out in full. The child ends by itself after 30s, so a
		// failure leaves nothing behind.
		started, got := ws.Root()+"/child-started", ws.Root()+"/child-term"
		child := `started=` + shq(started) + `; got=` + shq(got) + `
trap 'echo child-term > "$got"; exit 0' TERM
echo ok > "$started"
i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done`
		sigs := make(chan syscall.Signal, 1)
		ctx, cancel := context.WithCancel(ctxOf(t))
		defer cancel()
		o := execAsync(ctx, ws, opsapi.ExecRequest{
			Command: `env -i PATH=/usr/bin:/bin setsid sh -c ` + shq(child) + ` </dev/null >/dev/null 2>&1 &
sleep 30`,
			Signals: sigs,
		})
		if !eventually(10*time.Second, func() bool { _, err := ws.Stat(ctxOf(t), "child-started"); return err == nil }) {
			t.Fatal("the child never started")
		}
		sigs <- syscall.SIGTERM
		reached := eventually(10*time.Second, func() bool {
			b, err := readAll(ctxOf(t), ws, "child-term")
			return err == nil && string(b) == "child-term\n"
		})
		cancel()
		select {
		case r := <-o:
			must(t, r.err)
		case <-time.After(30 * time.Second):
			t.Fatal("Exec did not return within 30s of cancel")
		}
		if !reached {
			t.Fatal("SIGTERM did not reach the child that left the group and cleared its environment")
		}
	})
	t.Run("Exec_SIGKILL_ends_sleep_with_137", func(t *testing.T) {
		ws := s.signalCase(t)
		sigs := make(chan syscall.Signal, 1)
		out := &noticeWriter{mark: "ready\n", on: func() { sigs <- syscall.SIGKILL }}
		start := time.Now()
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: "echo ready; exec sleep 30", Output: out, Signals: sigs, Timeout: time.Minute,
		})
		must(t, err)
		eq(t, "exit code", res.ExitCode, 137)
		eq(t, "signal", res.Signal, "SIGKILL")
		eq(t, "timed out", res.TimedOut, false)
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("returned after %v: the SIGKILL came late", d)
		}
	})
	t.Run("Exec_a_signal_sent_before_the_command_runs_is_not_lost", func(t *testing.T) {
		// A background process signalled right after its start: the
		// signal is waiting before the shell has even been exec'd (or,
		// with cgroups, has entered its group). It must still land.
		ws := s.signalCase(t)
		for i := range 3 {
			sigs := make(chan syscall.Signal, 1)
			sigs <- syscall.SIGTERM
			start := time.Now()
			res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "sleep 30", Signals: sigs, Timeout: time.Minute})
			must(t, err)
			eq(t, fmt.Sprintf("round %d: exit code", i), res.ExitCode, 143)
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("round %d: returned after %v: the SIGTERM was lost", i, d)
			}
		}
	})
}

// runStdin executes cmd with stdin from in and returns its output and
// result; a command still running after a minute times out.
func runStdin(t *testing.T, ws opsapi.BashOperations, cmd string, in io.Reader) (string, opsapi.ExecResult) {
	t.Helper()
	var out bytes.Buffer
	res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: cmd, Stdin: in, Output: &out, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return out.String(), res
}

type outcome struct {
	res opsapi.ExecResult
	err error
}

// execAsync runs req on its own goroutine and delivers the outcome.
func execAsync(ctx context.Context, ws opsapi.BashOperations, req opsapi.ExecRequest) <-chan outcome {
	o := make(chan outcome, 1)
	go func() {
		res, err := ws.Exec(ctx, req)
		o <- outcome{res, err}
	}()
	return o
}

// syncBuffer is an Output that may be read while Exec writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// noticeWriter records output and calls on, once, when it first holds
// mark.
type noticeWriter struct {
	syncBuffer
	mark string
	on   func()
	once sync.Once
}

func (w *noticeWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), w.mark) {
		w.once.Do(w.on)
	}
	return n, err
}
