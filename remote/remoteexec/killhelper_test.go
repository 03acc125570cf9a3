package remoteexec_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// pipeRW is a local process's stdin and stdout as one stream.
type pipeRW struct {
	io.Reader
	io.WriteCloser
}

// TestKillHelperKillsByMarkerAndGroup: a running KillHelperScript, asked
// over its stdin, kills a process group and a process outside it that
// carries the marker, and answers with the count.
func TestKillHelperKillsByMarkerAndGroup(t *testing.T) {
	testutil.RequireCommand(t, "bash")
	helper := exec.Command("bash", "-c", remoteexec.KillHelperScript)
	stdin, _ := helper.StdinPipe()
	stdout, _ := helper.StdoutPipe()
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = helper.Wait() })
	k, err := remoteexec.StartKillHelper(t.Context(), pipeRW{stdout, stdin})
	if err != nil {
		t.Fatal(err)
	}

	b := make([]byte, 8)
	_, _ = rand.Read(b)
	marker := "KILLHELPER_TEST=" + hex.EncodeToString(b)
	group := exec.Command("sh", "-c", `trap '' TERM; sleep 600 & wait`)
	group.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	marked := exec.Command("sleep", "600")
	marked.Env = append(os.Environ(), marker)
	var exited []chan struct{}
	for _, c := range []*exec.Cmd{group, marked} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		exited = append(exited, done)
		t.Cleanup(func() { _ = c.Process.Kill(); <-done })
	}
	out, err := k.Kill(t.Context(), "group", strconv.Itoa(group.Process.Pid), marker)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(string(out[len("@wsbroker killed ") : len(out)-1])); n < 2 {
		t.Errorf("answer %q: want at least the group's shell and the marked sleep", out)
	}
	for i, done := range exited {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("process %d survived the kill", i)
		}
	}
	if _, err := k.Kill(t.Context(), "group", "1 2", marker); err == nil {
		t.Error("a kill with blanks in its arguments was sent")
	}
}
