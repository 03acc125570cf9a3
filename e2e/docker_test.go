package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestDockerEndToEnd drives the docker backend the way a user does: the
// broker binary serving with --docker, a workspace created with the CLI,
// pi's tools called through it, long commands ended by a timeout and by
// Ctrl-C with nothing left running in the container, and a delete that
// leaves no container and no volume on the engine.
func TestDockerEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker binary against the docker engine")
	}
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	b := startBroker(t, t.TempDir(), "--docker")

	ws := strings.TrimSpace(b.mustCLI(t, "ws", "create", "--backend", "docker"))
	if !idPattern.MatchString(ws) {
		t.Fatalf("ws create printed %q, want a workspace id", ws)
	}
	cid := engineQuery(t, "ps", "-aq", "--filter", "label=wsbroker.workspace="+ws)
	if cid == "" {
		t.Fatalf("no container labelled wsbroker.workspace=%s", ws)
	}
	t.Cleanup(func() { // whatever the test did, leave the engine clean
		_ = exec.Command("docker", "rm", "-f", cid).Run()
		_ = exec.Command("docker", "volume", "rm", "-f", "wsbroker-"+ws).Run()
	})

	t.Run("tools", func(t *testing.T) { cliTools(t, b, ws) })
	t.Run("ls", func(t *testing.T) {
		out := b.mustCLI(t, "tool", ws, "ls", `{}`)
		if !strings.Contains(out, "src/") {
			t.Fatalf("ls: %q", out)
		}
		// The workspace is the container's volume, as the command sees it.
		out = b.mustCLI(t, "tool", ws, "bash", `{"command":"pwd; id -u; cat src/hello.txt"}`)
		if !strings.Contains(out, "/workspace\n1000\nhello broker\n") {
			t.Fatalf("bash in the container: %q", out)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		mark := marker()
		r := b.cli(t, "", "exec", "--timeout", "1s", ws, "--",
			fmt.Sprintf("trap '' TERM; sleep %s & setsid sleep %s & sleep %s", mark, mark, mark))
		if r.code == 0 || !strings.Contains(r.stderr, "timed out") {
			t.Fatalf("timed-out command: exit %d, stderr %q", r.code, r.stderr)
		}
		waitNoProcess(t, cid, mark)
	})
	t.Run("interrupt", func(t *testing.T) {
		mark := marker()
		// interrupt finds the sleep through the host's /proc (the
		// container's processes are the host kernel's); the engine's
		// view must agree.
		interrupt(t, b, mark, "tool", ws, "bash", `{"command":"echo running; sleep `+mark+` & wait"}`)
		waitNoProcess(t, cid, mark)
	})

	b.mustCLI(t, "ws", "rm", ws)
	if got := engineQuery(t, "ps", "-aq", "--filter", "label=wsbroker.workspace="+ws); got != "" {
		t.Errorf("container %s left after ws rm", got)
	}
	if got := engineQuery(t, "volume", "ls", "-q", "--filter", "label=wsbroker.workspace="+ws); got != "" {
		t.Errorf("volume %s left after ws rm", got)
	}
	if out := b.mustCLI(t, "ws", "ls"); strings.Contains(out, ws) {
		t.Errorf("ws ls still lists %s after rm:\n%s", ws, out)
	}
}

// engineQuery runs the docker CLI and returns its trimmed output.
func engineQuery(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	if err != nil {
		t.Fatalf("docker %q: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// waitNoProcess waits until no process in the container runs with mark
// in its command line, as the engine (docker top) and the container's own
// ps see it.
func waitNoProcess(t *testing.T, cid, mark string) {
	t.Helper()
	var top, ps string
	ok := waitFor(10*time.Second, func() bool {
		top = engineQuery(t, "top", cid, "-eo", "pid,args")
		ps = engineQuery(t, "exec", cid, "ps", "-eo", "pid,args")
		return !strings.Contains(top, mark) && !strings.Contains(ps, mark)
	})
	if !ok {
		t.Fatalf("processes with %s left in the container:\ndocker top:\n%s\nps:\n%s", mark, top, ps)
	}
}
