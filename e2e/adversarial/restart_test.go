package adversarial_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// serveBroker starts the broker binary on a free loopback port with the
// given state dir and returns its URL, token and process.
func serveBroker(t *testing.T, bin, state string) (string, string, *exec.Cmd) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--listen", addr)
	cmd.Env = []string{"HOME=" + state, "PATH=" + os.Getenv("PATH"), "BROKER_STATE_DIR=" + state}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://" + addr
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(end) {
			t.Fatalf("broker did not start: %s", out.String())
		}
	}
	tok, err := os.ReadFile(filepath.Join(state, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return url, strings.TrimSpace(string(tok)), cmd
}

// TestBrokerSIGKILLedMidCommandThenRestarted: the broker process dies
// with a command running (and a setsid'ed, environment-clearing escapee
// beside it); the restarted broker kills both before serving, and the
// workspace is still there.
func TestBrokerSIGKILLedMidCommandThenRestarted(t *testing.T) {
	testutil.RequireRoot(t) // the escapee is only caught by cgroups
	dir := t.TempDir()
	bin := filepath.Join(dir, "broker")
	build := exec.Command("go", "build", "-o", bin, "github.com/wsbroker/wsbroker/cmd/broker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the broker: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state")
	url, tok, proc := serveBroker(t, bin, state)
	c := client.New(url, tok)
	info, err := c.CreateWorkspace(context.Background(), "local", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := c.WorkspaceFor(info)
	mark := fmt.Sprintf("600.%06d", time.Now().UnixNano()%1000000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = ws.Exec(ctx, opsapi.ExecRequest{Command: fmt.Sprintf(
			`setsid env -i /bin/sh -c 'exec sleep %[1]s' & sleep %[1]s`, mark)})
	}()
	pids := func() []int {
		var out []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !bytes.Equal(b, []byte("sleep\x00"+mark+"\x00")) {
				continue
			}
			var pid int
			if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
				continue
			}
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
				if i := bytes.LastIndexByte(st, ')'); i > 0 && st[i+2] != 'Z' {
					out = append(out, pid)
				}
			}
		}
		return out
	}
	for end := time.Now().Add(10 * time.Second); len(pids()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the command's sleeps did not start: %v", pids())
		}
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	// Killing the broker alone kills nothing: they are still there.
	if n := len(pids()); n != 2 {
		t.Fatalf("%d sleeps after the broker died, want 2 still running", n)
	}
	url, tok, _ = serveBroker(t, bin, state)
	for end := time.Now().Add(10 * time.Second); len(pids()) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("leftovers survived the restart: %v", pids())
		}
	}
	c = client.New(url, tok)
	if _, err := c.GetWorkspace(context.Background(), info.ID); err != nil {
		t.Fatalf("the workspace was lost across the restart: %v", err)
	}
	if err := c.DeleteWorkspace(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
}
