//go:build linux

package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// agentProc is the agent binary started as the docker backend starts
// it (serve --connect), with its stdin and stdout in the test's hands.
type agentProc struct {
	cmd    *exec.Cmd
	stdin  *os.File // the write end
	stdout *os.File // the read end
	ln     net.Listener
	keys   []byte // the agent's half, as one line
	broker agent.Creds
}

// startAgentProc starts the agent as cred (nil: the test's user), with
// extra as its descriptors 3 and up, not yet given its keys.
func startAgentProc(t *testing.T, cred *syscall.Credential, extra ...*os.File) *agentProc {
	t.Helper()
	dir, err := os.MkdirTemp("", "wsb-agent-hygiene-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "b.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	agentSide, brokerSide, err := agent.NewCredsPair()
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := json.Marshal(agentSide)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--connect", sock)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		inW.Close()
		outR.Close()
		ln.Close()
	})
	return &agentProc{cmd: cmd, stdin: inW, stdout: outR, ln: ln, keys: append(keys, '\n'), broker: brokerSide}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventuallyTrue(10*time.Second, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}

func eventuallyTrue(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// readingFd reports whether a thread of pid is blocked in read(2) on fd.
func readingFd(pid, fd int) bool {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	want := fmt.Sprintf("%d 0x%x ", unix.SYS_READ, fd)
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, task.Name()))
		if err == nil && strings.HasPrefix(string(b), want) {
			return true
		}
	}
	return false
}

// TestAgentUndumpableBeforeItsKeysAndStdinClosedAfter: run as an
// unprivileged user, the agent is already undumpable (its /proc files
// are root's) while it waits on stdin for its keys, and stdin is
// /dev/null once the key line is read, before the agent even says ready
// (its stdout is a full pipe here, so "ready" cannot be written yet).
func TestAgentUndumpableBeforeItsKeysAndStdinClosedAfter(t *testing.T) {
	agentBinary(t)
	testutil.RequireRoot(t)
	p := startAgentProc(t, &syscall.Credential{Uid: 65534, Gid: 65534})
	pid := p.cmd.Process.Pid
	waitFor(t, "the agent waits for its keys on stdin", func() bool { return readingFd(pid, 0) })
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/status", pid), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 {
		t.Fatalf("the agent waits for its keys while dumpable: its /proc files belong to uid %d", st.Uid)
	}
	if _, err := unix.FcntlInt(p.stdout.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	fillPipe(t, p)
	if _, err := p.stdin.Write(p.keys); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		c, err := agentclient.Accept(ctx, p.ln, p.broker)
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	fd0 := func() string { s, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", pid)); return s }
	waitFor(t, "the agent's stdin is /dev/null", func() bool { return fd0() == os.DevNull })
	if out, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", pid)); !strings.HasPrefix(out, "pipe:") {
		t.Errorf("stdout is %q before ready was written; the check above proves nothing", out)
	}
	if _, err := p.stdin.Write([]byte("more\n")); err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("the keys' pipe still has a reader after the key line: %v", err)
	}
	line, err := bufio.NewReader(p.stdout).ReadString('\n')
	if !strings.HasSuffix(line, "ready\n") {
		t.Errorf("the agent said %q, %v", line, err)
	}
	if err := <-accepted; err != nil {
		t.Errorf("the agent was not accepted: %v", err)
	}
}

// fillPipe fills the agent's stdout pipe (4 KiB) from a writer of the
// test's own, so that the agent's "ready" blocks.
func fillPipe(t *testing.T, p *agentProc) {
	t.Helper()
	w, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", p.stdout.Fd()), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
}

// TestInheritedDescriptorsReachNoCommand: a descriptor the agent
// inherited (as from a supervisor or a log redirection) is in neither a
// command nor its reaper.
func TestInheritedDescriptorsReachNoCommand(t *testing.T) {
	agentBinary(t)
	secret, err := os.CreateTemp("", "wsb-inherited-secret-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(secret.Name())
	defer secret.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	// fd 3 is where the agent puts each reaper's control socket: the
	// inherited one that would leak is fd 4.
	p := startAgentProc(t, nil, devnull, secret)
	if _, err := p.stdin.Write(p.keys); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = bufio.NewReader(p.stdout).ReadString('\n') }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agentclient.Accept(ctx, p.ln, p.broker)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if agentHas, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/4", p.cmd.Process.Pid)); agentHas != secret.Name() {
		t.Fatalf("the agent's fd 4 is %q, want the inherited %s: the test proves nothing", agentHas, secret.Name())
	}
	res, out, err := run(t, c, `ls -l /proc/$$/fd/ /proc/$PPID/fd/`, 0)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v: %s", res, err, out)
	}
	if strings.Contains(out, secret.Name()) {
		t.Errorf("an inherited descriptor reached the command or its reaper:\n%s", out)
	}
}
