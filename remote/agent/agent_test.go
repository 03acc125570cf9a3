package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/killtree"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// binary is cmd/wsb-agent (the agent), built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	if runtime.GOOS != "linux" {
		os.Exit(m.Run()) // each test skips
	}
	dir, err := os.MkdirTemp("", "wsb-agent-test-")
	if err != nil {
		panic(err)
	}
	// Open to every user: a test runs the agent as nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "wsb-agent")
	build := exec.Command("go", "build", "-o", binary, "github.com/wsbroker/wsbroker/cmd/wsb-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the agent: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func agentBinary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the agent runs on Linux only")
	}
	return binary
}

// serve starts an agent listening on a socket in a temporary directory
// and returns a connected client.
func serve(t *testing.T) (*agentclient.Client, string) {
	t.Helper()
	agentBinary(t)
	return serveB(t)
}

func serveB(t testing.TB) (*agentclient.Client, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	agentSide, brokerSide, err := agent.NewCredsPair()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := &agent.Server{Self: binary}
	go func() {
		if err := s.ConnectAndServe(sock, agentSide, func() {}); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agentclient.Accept(ctx, ln, brokerSide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, sock
}

var cfg = agentclient.ExecConfig{Shell: "/bin/bash", KillGrace: 500 * time.Millisecond,
	DrainIdle: 100 * time.Millisecond, MaxDrain: 5 * time.Second}

func run(t *testing.T, c *agentclient.Client, command string, timeout time.Duration) (opsapi.ExecResult, string, error) {
	t.Helper()
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), opsapi.ExecRequest{Command: command, Timeout: timeout, Output: &out},
		"/", []string{"WSB_TEST=1"}, cfg)
	return res, out.String(), err
}

func TestExecOutputAndStatus(t *testing.T) {
	c, _ := serve(t)
	res, out, err := run(t, c, `echo out; echo err >&2; echo $WSB_TEST; exit 3`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || out != "out\nerr\n1\n" {
		t.Errorf("exit %d, output %q", res.ExitCode, out)
	}
	res, _, err = run(t, c, `kill -TERM $$`, 0)
	if err != nil || res.ExitCode != 143 || res.Signal != "SIGTERM" {
		t.Errorf("killed by SIGTERM: %+v, %v", res, err)
	}
	_, err = c.Exec(context.Background(), opsapi.ExecRequest{Command: "true"}, "/nonexistent", nil, cfg)
	if !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("missing cwd: %v, want ErrNotExist", err)
	}
}

// TestOutputIsNotOvertakenByTheExit: output still in the agent's hands
// when the command exits (its relay not scheduled on a loaded box) reaches
// the client before the exit, so the client's drain by silence keeps it.
func TestOutputIsNotOvertakenByTheExit(t *testing.T) {
	c, _ := serve(t)
	defer agent.PauseOutputRelays(4 * cfg.DrainIdle)()
	for i := range 3 {
		res, out, err := run(t, c, `echo ok; echo two`, 0)
		if err != nil || res.ExitCode != 0 || out != "ok\ntwo\n" {
			t.Fatalf("run %d: exit %d, output %q, err %v", i, res.ExitCode, out, err)
		}
	}
}

// TestStderrIsNotOvertakenByTheExit: a program started with its stderr
// apart (ripgrep) has said everything there by the time Wait returns,
// however late its relay runs: the caller reads its error message then.
func TestStderrIsNotOvertakenByTheExit(t *testing.T) {
	c, _ := serve(t)
	defer agent.PauseOutputRelays(4 * cfg.DrainIdle)()
	for i := range 3 {
		var stderr testutil.LockedBuffer
		p, err := c.Start(context.Background(), []string{"/bin/sh", "-c", "echo bad regex >&2; exit 2"}, "/", nil, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		code, err := p.Wait()
		p.Close()
		if err != nil || code != 2 || string(out) != "" || stderr.String() != "bad regex\n" {
			t.Fatalf("run %d: exit %d (%v), stdout %q, stderr %q", i, code, err, out, stderr.String())
		}
	}
}

// TestCommandsStartWithDefaultSignals: no signal is ignored in a
// command, whatever the agent and reaper do with theirs: a pipeline's
// writer ends quietly on SIGPIPE, a SIGTERM ends a command.
func TestCommandsStartWithDefaultSignals(t *testing.T) {
	c, _ := serve(t)
	res, out, err := run(t, c, `grep SigIgn /proc/self/status; yes | head -n 1`, 0)
	if err != nil || res.ExitCode != 0 || out != "SigIgn:\t0000000000000000\ny\n" {
		t.Errorf("exit %d, output %q, %v", res.ExitCode, out, err)
	}
}

// TestKillReachesEnvClearingSetsidEscape: a process that leaves its
// group with setsid, clears its environment and whose parent exits (so it
// is orphaned) is still killed with its command: orphans go to the
// command's reaper, not to init.
func TestKillReachesEnvClearingSetsidEscape(t *testing.T) {
	c, _ := serve(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	res, _, err := run(t, c, `(env -i setsid bash -c 'echo $$ > `+pidFile+`; exec sleep 300' &); sleep 300`, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Killed < 2 {
		t.Errorf("result %+v: want a timeout that killed the sleeper and the escapee", res)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for killtree.Alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if killtree.Alive(pid) {
		t.Errorf("the setsid, env -i escapee %d survived its command's kill", pid)
	}
}

// TestBackgroundChildSurvivesTheCall: as in pi, a command's background
// child keeps running after the call returns, and its late output does
// not hang the call.
func TestBackgroundChildSurvivesTheCall(t *testing.T) {
	c, _ := serve(t)
	f := filepath.Join(t.TempDir(), "late")
	res, out, err := run(t, c, `(sleep 0.5; echo done > `+f+`) & echo started`, 0)
	if err != nil || res.ExitCode != 0 || out != "started\n" {
		t.Fatalf("%+v %q %v", res, out, err)
	}
	time.Sleep(time.Second)
	if b, err := os.ReadFile(f); err != nil || string(b) != "done\n" {
		t.Errorf("the background child did not finish: %q %v", b, err)
	}
}

// TestRefusesUnpinnedPeers: a broker without the agent's peer key gets
// no service from it, an agent without its key cannot pose as it, and
// connections that are not the agent's (a workspace command can reach
// the broker's socket) neither stall the broker nor are taken for it.
func TestRefusesUnpinnedPeers(t *testing.T) {
	agentBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agentSide, brokerSide, err := agent.NewCredsPair()
	if err != nil {
		t.Fatal(err)
	}
	_, stranger, _ := agent.NewCredsPair()
	listen := func() (net.Listener, string) {
		sock := filepath.Join(t.TempDir(), "b.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		return ln, sock
	}
	// The real agent, dialling a broker with other keys: refused.
	ln, sock := listen()
	go func() { _ = (&agent.Server{Self: binary}).ConnectAndServe(sock, agentSide, func() {}) }()
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	if c, err := agentclient.Accept(short, ln, stranger); err == nil {
		if _, _, err := run(t, c, "true", 0); err == nil {
			t.Fatal("a broker with other keys ran a command")
		}
	}
	stop()
	// A fake agent (its own keys), a silent connection and a plain-text
	// one come first; the real agent is still the one accepted.
	fakeAgent, _, _ := agent.NewCredsPair()
	ln, sock = listen()
	go func() { _ = (&agent.Server{}).ConnectAndServe(sock, fakeAgent, func() {}) }()
	var d net.Dialer
	for _, hello := range []string{"", "wsb-agent 1\n"} {
		conn, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = conn.Write([]byte(hello))
	}
	time.Sleep(200 * time.Millisecond)
	go func() { _ = (&agent.Server{Self: binary}).ConnectAndServe(sock, agentSide, func() {}) }()
	c, err := agentclient.Accept(ctx, ln, brokerSide)
	if err != nil {
		t.Fatalf("the agent was not accepted after strangers: %v", err)
	}
	defer c.Close()
	if res, out, err := run(t, c, "echo hi", 0); err != nil || res.ExitCode != 0 || out != "hi\n" {
		t.Errorf("through the accepted agent: %+v %q %v", res, out, err)
	}
	if _, err := d.DialContext(ctx, "unix", sock); err == nil {
		t.Error("the broker's socket still accepts connections once the agent is in")
	}
}

// TestCanceledCtxRunsNothing: a command asked for with a ctx already
// canceled does not run and the call returns at once (ssh's conformance
// run found one that ran, and each such call took about 30 s: the stream
// was closed under the request's write and the client waited for a kill's
// answer).
func TestCanceledCtxRunsNothing(t *testing.T) {
	c, _ := serve(t)
	ran := filepath.Join(t.TempDir(), "ran")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	begin := time.Now()
	defer func() {
		if took := time.Since(begin); took > 10*time.Second {
			t.Errorf("20 calls with a canceled ctx took %s", took)
		}
	}()
	for range 20 {
		res, err := c.Exec(ctx, opsapi.ExecRequest{Command: "touch " + ran}, "/", nil, cfg)
		if err == nil && !res.Canceled {
			t.Fatalf("Exec with a canceled ctx = %+v, want an error or Canceled", res)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a command asked for with a canceled ctx ran")
	}
}

func TestCancelKills(t *testing.T) {
	c, _ := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := c.Exec(ctx, opsapi.ExecRequest{Command: "sleep 60"}, "/", nil, cfg)
	if err != nil || !res.Canceled || res.Killed != 1 || res.ExitCode != 143 {
		t.Fatalf("canceled: %+v, %v", res, err)
	}
}

// TestCancelThenConnectionLossReturns: a command canceled, whose
// connection then ends before the agent answers the kill, returns at once
// rather than after the kill's answer timeout. A broker's DELETE of a
// docker workspace does exactly this (it cancels the workspace's commands,
// then Destroy closes the agent's connection), and an Exec over HTTP hung
// for 30 s after its workspace was gone. The command ignores SIGTERM and
// the grace is long, so the agent cannot answer before the close.
func TestCancelThenConnectionLossReturns(t *testing.T) {
	c, _ := serve(t)
	slow := cfg
	slow.KillGrace = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testutil.LockedBuffer{}
	type result struct {
		res opsapi.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Exec(ctx, opsapi.ExecRequest{Command: "trap '' TERM; echo started; sleep 60", Output: out}, "/", nil, slow)
		done <- result{res, err}
	}()
	waitOutput(t, out, "started")
	cancel()
	time.Sleep(300 * time.Millisecond) // the kill is asked for
	c.Close()
	select {
	case r := <-done:
		t.Logf("Exec ended with %+v, %v", r.res, r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("Exec still running 5s after its connection ended")
	}
}
