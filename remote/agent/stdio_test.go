package agent_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// execStdio runs command with stdin and signals, bounded by limit (a
// hang fails the test rather than blocking it); out receives the output.
func execStdio(t *testing.T, c *agentclient.Client, command string, stdin io.Reader, sigs <-chan syscall.Signal,
	out io.Writer, limit time.Duration) (opsapi.ExecResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return c.Exec(ctx, opsapi.ExecRequest{Command: command, Stdin: stdin, Signals: sigs, Output: out}, "/", nil, cfg)
}

// waitOutput waits until out holds want.
func waitOutput(t *testing.T, out *testutil.LockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Errorf("no %q in the output %q", want, out.String())
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStdinReachesTheCommand: what the caller's Stdin holds is the
// command's stdin, byte for byte, however much more than the agent's
// window it is.
func TestStdinReachesTheCommand(t *testing.T) {
	c, _ := serve(t)
	var out testutil.LockedBuffer
	res, err := execStdio(t, c, "cat", strings.NewReader("hello\nworld\n"), nil, &out, 20*time.Second)
	if err != nil || res.ExitCode != 0 || res.Canceled || out.String() != "hello\nworld\n" {
		t.Fatalf("cat: %+v, %v, output %q", res, err, out.String())
	}

	big := make([]byte, 4<<20) // 16 times the window
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(big)
	var hashed testutil.LockedBuffer
	res, err = execStdio(t, c, "sha256sum", strings.NewReader(string(big)), nil, &hashed, 60*time.Second)
	want := hex.EncodeToString(sum[:]) + "  -\n"
	if err != nil || res.ExitCode != 0 || hashed.String() != want {
		t.Fatalf("sha256sum of 4 MiB: %+v, %v, output %q, want %q", res, err, hashed.String(), want)
	}
}

// TestStdinEOFEndsTheCommand: the end of the caller's Stdin, EOF or an
// error, closes the command's stdin, and cat ends.
func TestStdinEOFEndsTheCommand(t *testing.T) {
	c, _ := serve(t)
	for _, end := range []error{nil, errors.New("the caller's input broke")} {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte("abc"))
			time.Sleep(100 * time.Millisecond)
			pw.CloseWithError(end) // nil: io.EOF
		}()
		var out testutil.LockedBuffer
		res, err := execStdio(t, c, `cat; echo " end-$?"`, pr, nil, &out, 20*time.Second)
		if err != nil || res.Canceled || res.ExitCode != 0 || out.String() != "abc end-0\n" {
			t.Errorf("stdin ended by %v: %+v, %v, output %q", end, res, err, out.String())
		}
	}
}

// TestStdinNotReadDoesNotHang: a command that never reads its stdin
// ends normally while the caller's Stdin never ends, and one that is
// offered more than the agent's window is still killed at once: the
// stdin that waits never holds up the stream's kill.
func TestStdinNotReadDoesNotHang(t *testing.T) {
	c, _ := serve(t)
	pr, pw := io.Pipe() // never written
	defer pw.Close()
	var out testutil.LockedBuffer
	res, err := execStdio(t, c, "sleep 0.2; echo done", pr, nil, &out, 20*time.Second)
	if err != nil || res.Canceled || res.ExitCode != 0 || out.String() != "done\n" {
		t.Fatalf("with a Stdin that never ends: %+v, %v, output %q", res, err, out.String())
	}

	endless := &zeros{}
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err = c.Exec(ctx, opsapi.ExecRequest{Command: "sleep 30", Stdin: endless}, "/", nil, cfg)
	took := time.Since(begin)
	if err != nil || !res.Canceled || res.Killed != 1 || took > 10*time.Second {
		t.Fatalf("canceled while stdin waits: %+v, %v after %s", res, err, took)
	}
	if n := endless.n.Load(); n <= agent.StdinWindow {
		t.Errorf("the client offered %d bytes of stdin, want more than the %d-byte window", n, agent.StdinWindow)
	}
}

// zeros is a Stdin that never ends.
type zeros struct{ n atomic.Int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n.Add(int64(len(p)))
	return len(p), nil
}

// TestSignalReachesTheTree: a signal from Signals reaches the command's
// shell (its trap runs) and a grandchild that left the group with setsid
// and cleared its environment.
func TestSignalReachesTheTree(t *testing.T) {
	c, _ := serve(t)
	sigs := make(chan syscall.Signal, 1)
	var out testutil.LockedBuffer
	go func() {
		waitOutput(t, &out, "ready")
		sigs <- syscall.SIGINT
	}()
	res, err := execStdio(t, c, `trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.1; done`, nil, sigs, &out, 20*time.Second)
	if err != nil || res.Canceled || res.ExitCode != 3 || !strings.Contains(out.String(), "got-int") {
		t.Fatalf("SIGINT to a trapping shell: %+v, %v, output %q", res, err, out.String())
	}

	mark := filepath.Join(t.TempDir(), "term")
	sigs = make(chan syscall.Signal, 1)
	var out2 testutil.LockedBuffer
	go func() {
		waitOutput(t, &out2, "child-ready")
		sigs <- syscall.SIGTERM
	}()
	res, err = execStdio(t, c, `env -i setsid sh -c 'trap "echo child-term >> `+mark+`; exit 0" TERM; echo child-ready; while :; do sleep 0.1; done' & wait`,
		nil, sigs, &out2, 20*time.Second)
	if err != nil || res.Canceled || res.ExitCode != 143 {
		t.Fatalf("SIGTERM to the tree: %+v, %v, output %q", res, err, out2.String())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(mark)
		if string(b) == "child-term\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the setsid, env -i grandchild did not get the SIGTERM: its file holds %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSignalKill: a SIGKILL from Signals, even one waiting before the
// command starts, ends it as a kill by that signal.
func TestSignalKill(t *testing.T) {
	c, _ := serve(t)
	sigs := make(chan syscall.Signal, 1)
	sigs <- syscall.SIGKILL
	begin := time.Now()
	res, err := execStdio(t, c, "sleep 30", nil, sigs, nil, 20*time.Second)
	if err != nil || res.Canceled || res.ExitCode != 137 || res.Signal != "SIGKILL" || time.Since(begin) > 10*time.Second {
		t.Fatalf("SIGKILL: %+v, %v after %s", res, err, time.Since(begin))
	}
}

// TestOldAgentRefusesStdio: through an agent that says it speaks version
// 1, a command with Stdin or Signals is refused as ErrUnavailable before
// it runs (that agent would ignore both), and one without still runs.
func TestOldAgentRefusesStdio(t *testing.T) {
	agentBinary(t)
	c := serveAsVersion1(t)
	if c.Version != 1 {
		t.Fatalf("negotiated version %d, want 1", c.Version)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	for name, req := range map[string]opsapi.ExecRequest{
		"stdin":   {Command: "touch " + ran, Stdin: strings.NewReader("x")},
		"signals": {Command: "touch " + ran, Signals: make(chan syscall.Signal)},
	} {
		_, err := c.Exec(context.Background(), req, "/", nil, cfg)
		if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "too old") {
			t.Errorf("%s through a version-1 agent: %v, want ErrUnavailable saying it is too old", name, err)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a refused command ran")
	}
	var out testutil.LockedBuffer
	res, err := c.Exec(context.Background(), opsapi.ExecRequest{Command: "echo ok", Output: &out}, "/", nil, cfg)
	if err != nil || res.ExitCode != 0 || out.String() != "ok\n" {
		t.Errorf("a plain command through a version-1 agent: %+v, %v, output %q", res, err, out.String())
	}
}

// serveAsVersion1 connects a client to an agent through a relay that
// rewrites the agent's hello to version 1.
func serveAsVersion1(t *testing.T) *agentclient.Client {
	t.Helper()
	return serveAsVersion(t, 1)
}

// serveAsVersion connects a client to an agent through a relay that
// rewrites the agent's hello to the given version.
func serveAsVersion(t *testing.T, version int) *agentclient.Client {
	t.Helper()
	clientEnd, relayIn := net.Pipe()
	relayOut, agentEnd := net.Pipe()
	s := &agent.Server{Self: binary}
	go func() { _ = s.ServeConn(agentEnd) }()
	go func() { _, _ = io.Copy(relayOut, relayIn) }()
	go func() {
		// The agent's hello, byte by byte: yamux follows it.
		one := make([]byte, 1)
		for one[0] != '\n' {
			if _, err := io.ReadFull(relayOut, one); err != nil {
				return
			}
		}
		_, _ = io.WriteString(relayIn, "wsb-agent "+strconv.Itoa(version)+"\n")
		_, _ = io.Copy(relayIn, relayOut)
	}()
	t.Cleanup(func() {
		clientEnd.Close()
		relayIn.Close()
		relayOut.Close()
		agentEnd.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agentclient.New(ctx, clientEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
