package remoteexec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// The transport in these tests is the local machine itself: argv runs as
// a real process, as it would behind an SSH session or a docker exec.

type localProc struct {
	cmd            *exec.Cmd
	stdout, stderr *os.File
	lost           *atomic.Bool
}

func (p *localProc) Stdout() io.Reader { return p.stdout }
func (p *localProc) Stderr() io.Reader { return p.stderr }
func (p *localProc) Close() error {
	p.stdout.Close()
	p.stderr.Close()
	return nil
}

func (p *localProc) Wait() (remoteexec.Status, error) {
	err := p.cmd.Wait()
	if p.lost != nil && p.lost.Load() {
		return remoteexec.Status{}, errors.New("connection lost")
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			return remoteexec.Status{Code: 128 + int(ws.Signal()), Signal: remoteexec.SignalName(int(ws.Signal()))}, nil
		}
		return remoteexec.Status{Code: ee.ExitCode()}, nil
	}
	return remoteexec.Status{}, err
}

type transport struct {
	started chan *localProc // receives each started process, if set
	lost    atomic.Bool
}

// leaderMode makes newRunner's transport start each process as the leader
// of a new session and report its exit as it happens, as sshd does
// (TestLeaderMode runs the other tests so).
var leaderMode bool

// loginShell, when set, runs the wrapper instead of sh, as an SSH login
// shell would.
var loginShell string

// leaderProc is a localProc whose exit is reported as soon as it exits.
type leaderProc struct {
	*localProc
	exited chan remoteexec.Status
	done   chan struct{}
	st     remoteexec.Status
	err    error
}

func (p *leaderProc) Exited() <-chan remoteexec.Status { return p.exited }

func (p *leaderProc) Wait() (remoteexec.Status, error) {
	<-p.done
	return p.st, p.err
}

func (tr *transport) start(ctx context.Context, argv []string) (remoteexec.Process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if loginShell != "" && argv[0] == "sh" {
		cmd = exec.Command(loginShell, argv[1:]...)
	}
	or, ow, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	er, ew, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = ow, ew
	if leaderMode {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ow.Close()
	ew.Close()
	p := &localProc{cmd: cmd, stdout: or, stderr: er, lost: &tr.lost}
	if tr.started != nil {
		tr.started <- p
	}
	if leaderMode {
		lp := &leaderProc{localProc: p, exited: make(chan remoteexec.Status, 1), done: make(chan struct{})}
		go func() {
			lp.st, lp.err = p.Wait()
			if lp.err == nil {
				lp.exited <- lp.st
			}
			close(lp.exited)
			close(lp.done)
		}()
		return lp, nil
	}
	return p, nil
}

func run(ctx context.Context, argv []string) ([]byte, error) {
	return exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
}

func newRunner(t *testing.T, tr *transport) *remoteexec.Runner {
	testutil.RequireCommand(t, "setsid")
	return remoteexec.New(tr.start, run, remoteexec.Config{
		KillGrace:     500 * time.Millisecond,
		Env:           []string{"LANG=C.UTF-8"},
		TransportExit: leaderMode,
	}, testutil.Logger(t))
}

func exe(t *testing.T, r *remoteexec.Runner, dir string, req opsapi.ExecRequest) (string, opsapi.ExecResult, error) {
	t.Helper()
	var out bytes.Buffer
	req.Output = &out
	res, err := r.Exec(t.Context(), req, dir)
	return out.String(), res, err
}

func TestExitCodesOrderAndEnv(t *testing.T) {
	r := newRunner(t, &transport{})
	dir := t.TempDir()
	for _, c := range []struct {
		cmd, out string
		code     int
		signal   string
	}{
		{"echo a; echo b >&2; echo c; echo d >&2", "a\nb\nc\nd\n", 0, ""},
		{"exit 42", "", 42, ""},
		{"kill -TERM $$; sleep 5", "", 143, "SIGTERM"},
		{"kill -KILL $$; sleep 5", "", 137, "SIGKILL"},
		{`printf '%s|%s|%s' "$K" "$LANG" "$(pwd)"`, "a b=c|C.UTF-8|" + dir, 0, ""},
		{"cat; echo end", "end\n", 0, ""},
		{`printf 'a\000b\377'`, "a\x00b\xff", 0, ""},
	} {
		out, res, err := exe(t, r, dir, opsapi.ExecRequest{Command: c.cmd, Env: []string{"K=a b=c"}})
		if err != nil {
			t.Fatalf("%q: %v", c.cmd, err)
		}
		if out != c.out || res.ExitCode != c.code || res.Signal != c.signal {
			t.Errorf("%q: out %q code %d signal %q, want %q %d %q", c.cmd, out, res.ExitCode, res.Signal, c.out, c.code, c.signal)
		}
	}
}

func TestCwdErrors(t *testing.T) {
	r := newRunner(t, &transport{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := exe(t, r, filepath.Join(dir, "missing"), opsapi.ExecRequest{Command: "touch ran"})
	if !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("missing cwd: %v", err)
	}
	_, _, err = exe(t, r, filepath.Join(dir, "f"), opsapi.ExecRequest{Command: "touch ran"})
	if !errors.Is(err, opsapi.ErrNotDir) {
		t.Errorf("file cwd: %v", err)
	}
	_, _, err = exe(t, r, dir, opsapi.ExecRequest{Command: "x\x00y"})
	if !errors.Is(err, opsapi.ErrInvalid) {
		t.Errorf("NUL: %v", err)
	}
	_, _, err = exe(t, r, dir, opsapi.ExecRequest{Command: "true", Env: []string{"WSBROKER_CALL=x"}})
	if !errors.Is(err, opsapi.ErrInvalid) {
		t.Errorf("reserved env: %v", err)
	}
}

// TestStdinRefused: the wrapper cannot carry stdin, so a request with it
// is ErrUnavailable, saying the in-box agent is needed, and runs nothing,
// with Signals or without.
func TestStdinRefused(t *testing.T) {
	// Room for both requests: one not refused must fail the test, not hang it.
	tr := &transport{started: make(chan *localProc, 2)}
	r := newRunner(t, tr)
	dir := t.TempDir()
	for name, req := range map[string]opsapi.ExecRequest{
		"stdin":             {Command: "touch ran", Stdin: strings.NewReader("x")},
		"stdin and signals": {Command: "touch ran", Stdin: strings.NewReader("x"), Signals: make(chan syscall.Signal)},
	} {
		_, _, err := exe(t, r, dir, req)
		if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "in-box agent") || !strings.Contains(err.Error(), "stdin") {
			t.Errorf("%s: error %v, want ErrUnavailable naming stdin and the in-box agent", name, err)
		} else if strings.Contains(err.Error(), "signal") {
			t.Errorf("%s: error %v speaks of signals, which the fallback carries", name, err)
		}
	}
	select {
	case <-tr.started:
		t.Fatal("a refused request started a process")
	default:
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused command ran: %v", err)
	}
}

// TestTTYRefused: the fallback runs commands on pipes, so a terminal is
// refused, not quietly replaced by pipes.
func TestTTYRefused(t *testing.T) {
	tr := &transport{started: make(chan *localProc, 1)}
	r := newRunner(t, tr)
	dir := t.TempDir()
	_, _, err := exe(t, r, dir, opsapi.ExecRequest{Command: "touch ran", TTY: &opsapi.TTYSize{Rows: 24, Cols: 80}})
	if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "terminal") {
		t.Fatalf("error %v, want ErrUnavailable naming the terminal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused command ran: %v", err)
	}
}

// noticeWriter is an Output that calls on, once, when what it holds first
// contains mark.
type noticeWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	mark string
	on   func()
	once sync.Once
}

func (w *noticeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, _ := w.buf.Write(p)
	hit := strings.Contains(w.buf.String(), w.mark)
	w.mu.Unlock()
	if hit {
		w.once.Do(w.on)
	}
	return n, nil
}

func (w *noticeWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestSignalReachesTrappingShell: a SIGINT sent once the command is ready
// runs its trap, whose exit status is the command's.
func TestSignalReachesTrappingShell(t *testing.T) {
	r := newRunner(t, &transport{})
	sigs := make(chan syscall.Signal, 1)
	out := &noticeWriter{mark: "ready\n", on: func() { sigs <- syscall.SIGINT }}
	res, err := r.Exec(t.Context(), opsapi.ExecRequest{
		Command: `trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.1; done`,
		Output:  out, Signals: sigs, Timeout: 20 * time.Second,
	}, t.TempDir())
	if err != nil || res.TimedOut || res.ExitCode != 3 || !strings.Contains(out.String(), "got-int") {
		t.Fatalf("SIGINT to a trapping shell: %+v, %v, output %q", res, err, out.String())
	}
}

// TestSignalReachesSetsidChildWithClearedEnv: the signal reaches a child
// that left the command's group and dropped the call's marker, which only
// its parent links to the command.
func TestSignalReachesSetsidChildWithClearedEnv(t *testing.T) {
	r := newRunner(t, &transport{})
	dir := t.TempDir()
	started, got := filepath.Join(dir, "child-started"), filepath.Join(dir, "child-term")
	child := `trap "echo child-term > ` + got + `; exit 0" TERM; echo ok > ` + started + `; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done`
	sigs := make(chan syscall.Signal, 1)
	type outcome struct {
		res opsapi.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Exec(t.Context(), opsapi.ExecRequest{
			Command: `env -i PATH=/usr/bin:/bin setsid sh -c ` + remoteexec.Quote(child) + ` </dev/null >/dev/null 2>&1 &
sleep 30`,
			Signals: sigs, Timeout: 20 * time.Second, Output: io.Discard,
		}, dir)
		done <- outcome{res, err}
	}()
	waitFile(t, started)
	sigs <- syscall.SIGTERM
	o := <-done
	if o.err != nil || o.res.TimedOut || o.res.ExitCode != 143 {
		t.Fatalf("SIGTERM to the tree: %+v, %v", o.res, o.err)
	}
	waitFile(t, got)
	if b, _ := os.ReadFile(got); string(b) != "child-term\n" {
		t.Fatalf("the child's file holds %q", b)
	}
}

// waitFile waits until file holds a whole line.
func waitFile(t *testing.T, file string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !pidWritten(file); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never written", filepath.Base(file))
		}
	}
}

// TestSignalKillEndsSleep: a SIGKILL ends the command as a kill by that
// signal, at once.
func TestSignalKillEndsSleep(t *testing.T) {
	r := newRunner(t, &transport{})
	sigs := make(chan syscall.Signal, 1)
	out := &noticeWriter{mark: "ready\n", on: func() { sigs <- syscall.SIGKILL }}
	start := time.Now()
	res, err := r.Exec(t.Context(), opsapi.ExecRequest{
		Command: "echo ready; exec sleep 30", Output: out, Signals: sigs, Timeout: time.Minute,
	}, t.TempDir())
	if err != nil || res.TimedOut || res.ExitCode != 137 || res.Signal != "SIGKILL" {
		t.Fatalf("SIGKILL to sleep: %+v, %v", res, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("returned after %v: the SIGKILL came late", d)
	}
}

// TestSignalsNobodySends: a Signals channel nobody sends on, or one
// closed, holds nothing up, and one sent before the command starts is
// delivered once its group is known.
func TestSignalsNobodySends(t *testing.T) {
	r := newRunner(t, &transport{})
	closed := make(chan syscall.Signal)
	close(closed)
	for name, sigs := range map[string]chan syscall.Signal{"idle": make(chan syscall.Signal), "closed": closed} {
		out, res, err := exe(t, r, t.TempDir(), opsapi.ExecRequest{Command: "echo hi", Signals: sigs})
		if err != nil || res.ExitCode != 0 || out != "hi\n" {
			t.Errorf("%s: %q %+v %v", name, out, res, err)
		}
	}
	early := make(chan syscall.Signal, 1)
	early <- syscall.SIGKILL
	_, res, err := exe(t, r, t.TempDir(), opsapi.ExecRequest{Command: "sleep 30", Signals: early, Timeout: time.Minute})
	if err != nil || res.ExitCode != 137 || res.Signal != "SIGKILL" {
		t.Fatalf("a SIGKILL sent before the start: %+v, %v", res, err)
	}
}

// alive reports whether the pid in file is a live (non-zombie) process.
func alive(t *testing.T, file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	return !strings.Contains(string(st[bytes.LastIndexByte(st, ')'):]), ") Z")
}

// pidWritten reports whether file holds a whole line: the shell creates
// the file for "echo $$ > file" before echo writes to it, and an empty
// file read as pid 0 would make a live process look dead.
func pidWritten(file string) bool {
	b, err := os.ReadFile(file)
	return err == nil && bytes.HasSuffix(b, []byte("\n"))
}

func waitGone(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		deadline := time.Now().Add(5 * time.Second)
		for alive(t, f) {
			if time.Now().After(deadline) {
				t.Fatalf("process of %s still alive", f)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestTimeoutKillsGrandchildAndSetsidEscapee(t *testing.T) {
	r := newRunner(t, &transport{})
	dir := t.TempDir()
	start := time.Now()
	_, res, err := exe(t, r, dir, opsapi.ExecRequest{
		Command: `trap '' TERM; sh -c 'echo $$ > gc.pid; exec sleep 600' &
setsid sh -c 'echo $$ > esc.pid; exec sleep 600' </dev/null >/dev/null 2>&1 &
sleep 600`,
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode == 0 || res.Killed < 3 {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	waitGone(t, filepath.Join(dir, "gc.pid"), filepath.Join(dir, "esc.pid"))
}

func TestCancelKillsTree(t *testing.T) {
	r := newRunner(t, &transport{})
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for {
			if pidWritten(filepath.Join(dir, "gc.pid")) {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, err := r.Exec(ctx, opsapi.ExecRequest{Command: `(sh -c 'echo $$ > gc.pid; exec sleep 600' & wait)`}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Canceled {
		t.Fatalf("result %+v", res)
	}
	waitGone(t, filepath.Join(dir, "gc.pid"))
}

func TestBackgroundHolderAndLateOutput(t *testing.T) {
	r := newRunner(t, &transport{})
	dir := t.TempDir()
	start := time.Now()
	out, res, err := exe(t, r, dir, opsapi.ExecRequest{Command: "sleep 30 & echo $! > bg.pid; (while kill -0 $$ 2>/dev/null; do :; done; echo late) & echo done"})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("returned after %v", d)
	}
	if out != "done\nlate\n" || res.ExitCode != 0 {
		t.Fatalf("out %q res %+v", out, res)
	}
	if _, _, err := exe(t, r, dir, opsapi.ExecRequest{Command: "kill $(cat bg.pid)"}); err != nil {
		t.Errorf("killing the background sleep: %v", err)
	}
}

func TestLostTransportFailsClearlyAndReapKills(t *testing.T) {
	tr := &transport{started: make(chan *localProc, 1)}
	r := newRunner(t, tr)
	dir := t.TempDir()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Exec(t.Context(), opsapi.ExecRequest{Command: `sh -c 'echo $$ > gc.pid; exec sleep 600' & wait`}, dir)
		errc <- err
	}()
	p := <-tr.started
	tr.started = nil
	for !pidWritten(filepath.Join(dir, "gc.pid")) {
		time.Sleep(10 * time.Millisecond)
	}
	// The transport dies: both streams end, no exit status comes.
	tr.lost.Store(true)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, opsapi.ErrUnavailable) {
			t.Fatalf("error = %v, want ErrUnavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec hung after its transport died")
	}
	if !alive(t, filepath.Join(dir, "gc.pid")) {
		t.Fatal("the orphan died by itself; the test proves nothing")
	}
	tr.lost.Store(false)
	n, err := r.Reap(t.Context())
	if err != nil || n < 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}
	waitGone(t, filepath.Join(dir, "gc.pid"))
}

func TestBoundedMemoryFor256MiB(t *testing.T) {
	r := newRunner(t, &transport{})
	var n countWriter
	res, err := r.Exec(t.Context(), opsapi.ExecRequest{Command: "head -c 256M /dev/zero", Output: &n}, t.TempDir())
	if err != nil || res.ExitCode != 0 || n != 256<<20 {
		t.Fatalf("res %+v err %v bytes %d", res, err, n)
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":        "''",
		"abc/d.e": "abc/d.e",
		"a b":     "'a b'",
		"it's":    `'it'\''s'`,
		"$HOME":   "'$HOME'",
	} {
		if got := remoteexec.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	out, err := exec.Command("sh", "-c", "printf '%s|' "+remoteexec.ShellJoin([]string{"a b", "it's", "$x", "\n"})).Output()
	if err != nil || string(out) != "a b|it's|$x|\n|" {
		t.Fatalf("%q %v", out, err)
	}
}

// TestLeaderMode runs the behaviour tests again on a transport that starts
// each command as a session leader and reports its exit at once: the
// wrapper then becomes the command (bash evals it) instead of waiting for
// it, and everything must behave the same.
func TestLeaderMode(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"ExitCodesOrderAndEnv", TestExitCodesOrderAndEnv},
		{"CwdErrors", TestCwdErrors},
		{"SignalReachesTrappingShell", TestSignalReachesTrappingShell},
		{"SignalReachesSetsidChildWithClearedEnv", TestSignalReachesSetsidChildWithClearedEnv},
		{"SignalKillEndsSleep", TestSignalKillEndsSleep},
		{"SignalsNobodySends", TestSignalsNobodySends},
		{"TimeoutKillsGrandchildAndSetsidEscapee", TestTimeoutKillsGrandchildAndSetsidEscapee},
		{"CancelKillsTree", TestCancelKillsTree},
		{"BackgroundHolderAndLateOutput", TestBackgroundHolderAndLateOutput},
		{"LostTransportFailsClearlyAndReapKills", TestLostTransportFailsClearlyAndReapKills},
	} {
		t.Run(c.name, func(t *testing.T) {
			leaderMode = true
			t.Cleanup(func() { leaderMode = false })
			c.fn(t)
		})
	}
	for _, sh := range []string{"", "bash"} {
		t.Run("CommandRunsInTheWrapperShell"+sh, func(t *testing.T) {
			leaderMode, loginShell = true, sh
			t.Cleanup(func() { leaderMode, loginShell = false, "" })
			r := newRunner(t, &transport{})
			// The command's shell is the process the transport started
			// (its parent is this test), leading its group; with bash as
			// the wrapper's shell it is that bash, and no wrapper variable
			// or argument leaks into the command.
			out, res, err := exe(t, r, t.TempDir(), opsapi.ExecRequest{
				Command: `echo "$PPID $$ $(ps -o pgid= -p $$) $# [$cmd$cwd$shell$how$lead$st]"`})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%v %+v", err, res)
			}
			f := strings.Fields(out)
			if len(f) != 5 || f[0] != strconv.Itoa(os.Getpid()) || f[1] != f[2] || f[3] != "0" || f[4] != "[]" {
				t.Fatalf("out %q: want this test as the parent, the shell's pid as its group, no arguments, no wrapper variables", out)
			}
		})
	}
	t.Run("BashWrapperRunsEverything", func(t *testing.T) {
		leaderMode, loginShell = true, "bash"
		t.Cleanup(func() { leaderMode, loginShell = false, "" })
		TestExitCodesOrderAndEnv(t)
		TestTimeoutKillsGrandchildAndSetsidEscapee(t)
		TestBackgroundHolderAndLateOutput(t)
	})
}
