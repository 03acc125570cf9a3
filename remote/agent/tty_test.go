package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// execTTY runs command on a terminal of size, with env added, bounded
// by limit; out receives what the terminal displays.
func execTTY(t *testing.T, c *agentclient.Client, command string, size opsapi.TTYSize, env []string, stdin io.Reader,
	resize <-chan opsapi.TTYSize, out io.Writer, limit time.Duration) (opsapi.ExecResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return c.Exec(ctx, opsapi.ExecRequest{Command: command, TTY: &size, Resize: resize, Stdin: stdin, Output: out}, "/", env, cfg)
}

// lines is a terminal's output with its "\r\n" as "\n".
func lines(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// waitCount waits until out holds want at least n times; false (the
// test failed) when it never does.
func waitCount(t *testing.T, out *testutil.LockedBuffer, want string, n int) bool {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for strings.Count(out.String(), want) < n {
		if time.Now().After(deadline) {
			t.Errorf("not %d times %q in the output %q", n, want, out.String())
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestTTYIsTheTerminal: the command's stdin and stdout are a terminal of
// the size asked for, and what it displays before its exit is all there,
// however late the relay runs.
func TestTTYIsTheTerminal(t *testing.T) {
	c, _ := serve(t)
	for _, pause := range []time.Duration{0, 4 * cfg.DrainIdle} {
		restore := agent.PauseOutputRelays(pause)
		var out testutil.LockedBuffer
		res, err := execTTY(t, c, "test -t 0 && test -t 1 && stty size", opsapi.TTYSize{Rows: 30, Cols: 100}, nil, nil, nil, &out, 20*time.Second)
		restore()
		if err != nil || res.ExitCode != 0 || res.Canceled || lines(out.String()) != "30 100\n" {
			t.Errorf("relays paused %s: %+v, %v, output %q, want \"30 100\\r\\n\"", pause, res, err, out.String())
		}
	}
}

// interactiveBash is an interactive bash prompting "$ ". PS1 is given on
// its command line, not in the request's Env: the command's shell, bash
// -c, is not interactive and so drops PS1 from what it passes on.
const interactiveBash = "PS1='$ ' bash --norc --noprofile -i"

// TestTTYInteractiveShell: an interactive bash reads what is typed at
// its terminal and exits as told.
func TestTTYInteractiveShell(t *testing.T) {
	c, _ := serve(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out testutil.LockedBuffer
	go func() {
		waitOutput(t, &out, "$ ")
		_, _ = io.WriteString(pw, "echo hi-$((1+1))\r")
		waitOutput(t, &out, "hi-2")
		_, _ = io.WriteString(pw, "exit 7\r")
	}()
	res, err := execTTY(t, c, interactiveBash, opsapi.TTYSize{Rows: 24, Cols: 80}, nil, pr, nil, &out, 30*time.Second)
	if err != nil || res.Canceled || res.ExitCode != 7 || !strings.Contains(out.String(), "hi-2") {
		t.Fatalf("bash -i: %+v, %v, output %q; want hi-2 and exit 7", res, err, out.String())
	}
}

// TestTTYResize: a new size reaches the terminal, and its foreground
// group gets SIGWINCH.
func TestTTYResize(t *testing.T) {
	c, _ := serve(t)
	resize := make(chan opsapi.TTYSize, 1)
	var out testutil.LockedBuffer
	go func() {
		waitOutput(t, &out, "ready")
		resize <- opsapi.TTYSize{Rows: 50, Cols: 132}
	}()
	res, err := execTTY(t, c, `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.1; done`,
		opsapi.TTYSize{Rows: 24, Cols: 80}, nil, nil, resize, &out, 20*time.Second)
	if err != nil || res.Canceled || res.ExitCode != 0 || !strings.Contains(out.String(), "50 132") {
		t.Fatalf("resized to 50x132: %+v, %v, output %q", res, err, out.String())
	}
}

// TestTTYCtrlC: a Ctrl-C typed at the terminal interrupts the shell's
// foreground job, not the shell, which goes on.
func TestTTYCtrlC(t *testing.T) {
	c, _ := serve(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out testutil.LockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !waitCount(t, &out, "$ ", 1) {
			return
		}
		_, _ = io.WriteString(pw, "sleep 30; echo after\r")
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(pw, "\x03")
		if !waitCount(t, &out, "$ ", 2) { // the prompt again, once the job is interrupted
			return
		}
		_, _ = io.WriteString(pw, "echo survived $?\r")
		if waitCount(t, &out, "survived 130", 1) {
			_, _ = io.WriteString(pw, "exit\r")
		}
	}()
	begin := time.Now()
	res, err := execTTY(t, c, interactiveBash, opsapi.TTYSize{Rows: 24, Cols: 80}, nil, pr, nil, &out, 40*time.Second)
	took := time.Since(begin)
	pw.Close()
	<-done
	got := lines(out.String())
	if err != nil || res.Canceled || res.ExitCode != 0 || !strings.Contains(got, "survived 130") || took > 15*time.Second {
		t.Fatalf("Ctrl-C: %+v, %v after %s, output %q; want survived 130 and exit 0 well within the sleep's 30 s", res, err, took, got)
	}
	if strings.Contains(got, "\nafter\n") {
		t.Errorf("the interrupted list went on: output %q", got)
	}
}

// TestOldAgentRefusesTTY: through an agent that says it speaks version 2,
// a command on a terminal is refused as ErrUnavailable before it runs;
// stdin still goes through.
func TestOldAgentRefusesTTY(t *testing.T) {
	agentBinary(t)
	c := serveAsVersion(t, 2)
	if c.Version != 2 {
		t.Fatalf("negotiated version %d, want 2", c.Version)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	_, err := c.Exec(context.Background(), opsapi.ExecRequest{Command: "touch " + ran, TTY: &opsapi.TTYSize{Rows: 24, Cols: 80}}, "/", nil, cfg)
	if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "too old for terminals") {
		t.Errorf("a terminal through a version-2 agent: %v, want ErrUnavailable saying it is too old for terminals", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a refused command ran")
	}
	var out testutil.LockedBuffer
	res, err := c.Exec(context.Background(), opsapi.ExecRequest{Command: "cat", Stdin: strings.NewReader("ok\n"), Output: &out}, "/", nil, cfg)
	if err != nil || res.ExitCode != 0 || out.String() != "ok\n" {
		t.Errorf("stdin through a version-2 agent: %+v, %v, output %q", res, err, out.String())
	}
}

// TestTTYIsTheControllingTerminal: a program started straight on a
// terminal (no shell that would take the terminal itself) leads a
// session of its own, with the terminal as its controlling terminal and
// its group in the foreground.
func TestTTYIsTheControllingTerminal(t *testing.T) {
	sess, _ := rawAgent(t)
	st := openExec(t, sess, agent.ExecSpec{Argv: []string{"cat", "/proc/self/stat"}, TTY: &agent.TTYSize{Rows: 24, Cols: 80}})
	defer st.Close()
	got := readExec(st)
	// pid (comm) state ppid pgrp session tty_nr tpgid ...
	pid, rest, _ := strings.Cut(got.out, " ")
	_, rest, _ = strings.Cut(rest, ") ")
	f := strings.Fields(rest)
	if got.exit != "0" || len(f) < 6 {
		t.Fatalf("cat /proc/self/stat: %+v", got)
	}
	pgrp, session, ttyNr, tpgid := f[2], f[3], f[4], f[5]
	if session != pid || pgrp != pid || ttyNr == "0" || tpgid != pid {
		t.Errorf("pid %s: group %s, session %s, terminal %s, its foreground group %s; want a session of its own on its terminal, in the foreground",
			pid, pgrp, session, ttyNr, tpgid)
	}
}

// TestBadResizeFrames: malformed sizes are dropped while the stream goes
// on (a good one after them is the one the command sees), as is a size
// for a command without a terminal; the agent goes on serving.
func TestBadResizeFrames(t *testing.T) {
	sess, done := rawAgent(t)
	open := func(spec agent.ExecSpec) net.Conn { t.Helper(); return openExec(t, sess, spec) }
	send := func(st net.Conn, typ byte, payload string) { t.Helper(); sendFrame(t, st, typ, payload) }

	st := open(agent.ExecSpec{Argv: []string{"/bin/sh", "-c", `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.1; done`},
		TTY: &agent.TTYSize{Rows: 24, Cols: 80}})
	fr := agent.NewFrameReader(st)
	var out string
	for !strings.Contains(out, "ready") {
		typ, p, err := fr.Read()
		if err != nil {
			t.Fatalf("before ready: %v, output %q", err, out)
		}
		if typ == agent.FrameOutput {
			out += string(p)
		}
	}
	for _, bad := range []string{"", "abc", "50", "50 ", " 50 132", "50  132", "50 132 ", "050 132", "50 0132", "-1 132",
		"+50 132", "65536 1", "1 65536", "50 1e3", "50\t132", "99999999999999999999 1", "50 132\n"} {
		send(st, agent.FrameResize, bad)
	}
	time.Sleep(200 * time.Millisecond)    // a bad size applied would have run the trap by now
	send(st, agent.FrameResize, "40 120") // none of the bad ones reads as this
	out, exit := "", ""
	for exit == "" {
		typ, p, err := fr.Read()
		if err != nil {
			t.Fatalf("after the sizes: %v, output %q", err, out)
		}
		switch typ {
		case agent.FrameOutput:
			out += string(p)
		case agent.FrameExit:
			exit = string(p)
		}
	}
	if exit != "0" || lines(out) != "40 120\n" {
		t.Errorf("after malformed sizes, 40 120: exit %s, output %q; want output 40 120 and exit 0", exit, out)
	}
	st.Close()

	st = open(agent.ExecSpec{Argv: []string{"/bin/sh", "-c", "sleep 0.2; echo done"}})
	send(st, agent.FrameResize, "50 132")
	if got := readExec(st); got.exit != "0" || got.out != "done\n" {
		t.Errorf("a size for a command without a terminal: %+v, want output done and exit 0", got)
	}
	st.Close()
	stillServes(t, sess, done, "the bad sizes")
}
