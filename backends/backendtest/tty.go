package backendtest

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// tty covers ExecRequest.TTY and Resize: the command sees a terminal of
// the size asked, an interactive shell reads what is typed, a resize and
// a Ctrl-C reach the foreground group, and the kill works as on pipes.
func (s *suite) tty(t *testing.T) {
	s.ttyTerminal(t)
	s.ttyLifecycle(t)
}

// ttyTerminal holds the cases of what the command sees: the terminal,
// its size, what is typed, a resize and a Ctrl-C.
func (s *suite) ttyTerminal(t *testing.T) {
	t.Run("Exec_TTY_is_a_terminal_of_its_size", func(t *testing.T) {
		ws := s.ttyCase(t)
		var out bytes.Buffer
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: "test -t 0 && test -t 1 && test -t 2 && stty size",
			TTY:     &opsapi.TTYSize{Rows: 30, Cols: 100}, Output: &out, Timeout: time.Minute,
		})
		must(t, err)
		eq(t, "exit code", res.ExitCode, 0)
		eq(t, "output", crlf(out.String()), "30 100\n")
	})
	t.Run("Exec_TTY_interactive_bash_reads_what_is_typed", func(t *testing.T) {
		ws := s.ttyCase(t)
		sh := startTTY(t, ws, opsapi.ExecRequest{Command: interactiveBash})
		at := sh.prompt(t, 0)
		sh.typ(t, "echo hi-$((1+1))\r")
		sh.prompt(t, at)
		sh.typ(t, "exit 7\r")
		r := sh.wait(t)
		eq(t, "exit code", r.res.ExitCode, 7)
		if !slices.Contains(lines(sh.out.String()), "hi-2") {
			t.Errorf("output %q lacks the line hi-2", sh.out.String())
		}
	})
	t.Run("Exec_Resize_reaches_the_command_as_SIGWINCH", func(t *testing.T) {
		ws := s.ttyCase(t)
		sizes := make(chan opsapi.TTYSize, 1)
		out := &noticeWriter{mark: "ready", on: func() { sizes <- opsapi.TTYSize{Rows: 50, Cols: 132} }}
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{
			Command: `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.1; done`,
			TTY:     &opsapi.TTYSize{Rows: 24, Cols: 80}, Resize: sizes,
			Output: out, Timeout: 30 * time.Second,
		})
		must(t, err)
		eq(t, "timed out", res.TimedOut, false)
		eq(t, "exit code", res.ExitCode, 0)
		if !slices.Contains(lines(out.String()), "50 132") {
			t.Errorf("output %q lacks the new size 50 132", out.String())
		}
	})
	t.Run("Exec_TTY_Ctrl-C_interrupts_the_foreground_job", func(t *testing.T) {
		ws := s.ttyCase(t)
		start := time.Now()
		sh := startTTY(t, ws, opsapi.ExecRequest{Command: interactiveBash})
		at := sh.prompt(t, 0)
		sh.typ(t, "sleep 30; echo after\r")
		sh.await(t, at, "echo after")
		time.Sleep(300 * time.Millisecond) // sleep runs in the foreground
		sh.typ(t, "\x03")
		at = sh.prompt(t, at)
		sh.typ(t, "echo survived $?\r")
		sh.prompt(t, at)
		sh.typ(t, "exit\r")
		r := sh.wait(t)
		eq(t, "exit code", r.res.ExitCode, 0)
		got := lines(sh.out.String())
		if !slices.Contains(got, "survived 130") {
			t.Errorf("output %q lacks survived 130", sh.out.String())
		}
		if slices.Contains(got, "after") {
			t.Errorf("output %q: the list went on after the Ctrl-C", sh.out.String())
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v: the Ctrl-C did not end sleep 30", d)
		}
	})
}

// ttyLifecycle holds the cases of the call's end on a terminal: the
// drain, and the kill on cancel.
func (s *suite) ttyLifecycle(t *testing.T) {
	t.Run("Exec_TTY_returns_while_a_background_child_holds_the_terminal", func(t *testing.T) {
		// The child ignores the hangup and keeps the slave open: the
		// master never reads its end, so the drain ends the call.
		ws := s.ttyCase(t)
		var out syncBuffer
		o := execAsync(ctxOf(t), ws, opsapi.ExecRequest{
			Command: `(trap '' HUP; exec sleep 30) & echo done`,
			TTY:     &opsapi.TTYSize{Rows: 24, Cols: 80}, Output: &out, Timeout: time.Minute,
		})
		select {
		case r := <-o:
			must(t, r.err)
			eq(t, "exit code", r.res.ExitCode, 0)
			eq(t, "output", crlf(out.String()), "done\n")
		case <-time.After(20 * time.Second):
			t.Fatalf("Exec still running 20s after the shell's exit (output %q)", out.String())
		}
	})
	t.Run("Exec_ctx_cancel_kills_sleep_on_a_TTY", func(t *testing.T) {
		ws := s.ttyCase(t)
		ctx, cancel := context.WithCancel(ctxOf(t))
		defer cancel()
		out := &noticeWriter{mark: "ready", on: cancel}
		start := time.Now()
		o := execAsync(ctx, ws, opsapi.ExecRequest{
			Command: "echo ready; sleep 30", TTY: &opsapi.TTYSize{Rows: 24, Cols: 80}, Output: out,
		})
		select {
		case r := <-o:
			must(t, r.err)
			eq(t, "canceled", r.res.Canceled, true)
			if r.res.ExitCode == 0 {
				t.Errorf("exit code 0 after a cancel")
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("returned after %v: the kill came late", d)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Exec did not return within 30s of cancel (output %q)", out.String())
		}
	})
}

// interactiveBash is a bash reading commands from its terminal, without
// the host's rc files, prompting "$ ". The prompt is set on the command
// line: a bash -c does not pass on a PS1 from its environment (ExecRequest.Env).
const interactiveBash = "PS1='$ ' bash --norc --noprofile -i"

// ttyCase skips t when the transport has no terminals.
func (s *suite) ttyCase(t *testing.T) opsapi.Operations {
	t.Helper()
	if s.o.NoTTY != "" {
		t.Skip(s.o.NoTTY)
	}
	return s.parallel(t)
}

// ttySession is a command running on a terminal, typed at through in.
type ttySession struct {
	in  *io.PipeWriter
	out *syncBuffer
	o   <-chan outcome
}

// startTTY runs req on a 24x80 terminal, with Stdin and Output the
// session's.
func startTTY(t *testing.T, ws opsapi.BashOperations, req opsapi.ExecRequest) *ttySession {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	sh := &ttySession{in: pw, out: &syncBuffer{}}
	req.TTY = &opsapi.TTYSize{Rows: 24, Cols: 80}
	req.Stdin, req.Output = pr, sh.out
	if req.Timeout == 0 {
		req.Timeout = time.Minute
	}
	o := make(chan outcome, 1)
	go func() {
		res, err := ws.Exec(ctxOf(t), req)
		pr.Close() // a Read Exec left, and any typing after the end
		o <- outcome{res, err}
	}()
	sh.o = o
	return sh
}

// typ types s at the terminal.
func (sh *ttySession) typ(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(sh.in, s); err != nil {
		t.Fatalf("typing %q: %v (output %q)", s, err, sh.out.String())
	}
}

// await waits until the output past from holds want and returns where
// want ends.
func (sh *ttySession) await(t *testing.T, from int, want string) int {
	t.Helper()
	end := -1
	eventually(30*time.Second, func() bool {
		out := sh.out.String()
		if i := strings.Index(out[from:], want); i >= 0 {
			end = from + i + len(want)
		}
		return end >= 0
	})
	if end < 0 {
		t.Fatalf("no %q in the output past byte %d within 30s: %q", want, from, sh.out.String())
	}
	return end
}

// prompt waits for the next "$ " prompt past from and returns where it
// ends.
func (sh *ttySession) prompt(t *testing.T, from int) int {
	t.Helper()
	return sh.await(t, from, "$ ")
}

// wait returns the call's outcome, failing on an Exec error or when it
// does not come within 30s.
func (sh *ttySession) wait(t *testing.T) outcome {
	t.Helper()
	select {
	case r := <-sh.o:
		must(t, r.err)
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("Exec did not return within 30s (output %q)", sh.out.String())
		return outcome{}
	}
}

// crlf turns a terminal's line ends into "\n".
func crlf(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// lines splits a terminal's output into lines without their ends.
func lines(s string) []string {
	l := strings.Split(crlf(s), "\n")
	for i := range l {
		l[i] = strings.TrimRight(l[i], "\r")
	}
	return l
}
