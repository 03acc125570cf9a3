package docker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/opsapi"
)

// killAgent kills the workspace's agent from inside, as any command of
// the container's user can. The call itself may fail: it ran under the
// agent.
func killAgent(t *testing.T, ws *docker.Workspace) {
	t.Helper()
	_, _ = ws.Exec(t.Context(), opsapi.ExecRequest{Command: `pkill -KILL -f 'sftp-server[ ]serve'; sleep 5`})
}

// dirBytes is what the files below dir hold.
func dirBytes(t *testing.T, dir string) (n int64, names []string) {
	t.Helper()
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != dir {
			n += fi.Size()
			names = append(names, fi.Name())
		}
		return nil
	})
	return n, names
}

// TestAgentRunDirIsNotTheWorkspaces (issue 37, finding 5): the agent's
// run directory, a host directory, can be neither filled nor broken by
// a workspace command (the container's user, the agent's own); a killed
// agent is replaced by a fresh one, never by the engine's exec, so an
// `env -i setsid` escapee still dies with its call's kill.
func TestAgentRunDirIsNotTheWorkspaces(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	sh(t, ws, "true") // the agent is up
	host := ws.AgentDir()
	if host == "" {
		t.Fatal("the workspace has no agent run directory")
	}
	var out strings.Builder
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Output: &out,
		Command: `head -c 300M /dev/zero > ` + docker.AgentRunDir + `/fill; echo wrote $?; chmod 000 ` + docker.AgentRunDir + `; echo chmod $?`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if !strings.Contains(out.String(), "wrote 1") || !strings.Contains(out.String(), "chmod 1") {
		t.Errorf("the run directory took a write or a chmod from the workspace:\n%s", out.String())
	}
	if n, names := dirBytes(t, host); n > 0 || len(names) > 0 {
		t.Errorf("the host's run directory holds %d bytes in %v", n, names)
	}
	if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the host's run directory: %v %v", fi.Mode(), err)
	}

	killAgent(t, ws)
	if out := sh(t, ws, `tr '\0' ' ' < /proc/$PPID/cmdline`); !strings.Contains(out, docker.InjectedSFTPServer+" reap") {
		t.Fatalf("after the agent was killed, a command's parent is %q, not a fresh agent's reaper", out)
	}
	if got := ws.Transport(); got != (opsapi.Transport{Agent: true}) {
		t.Errorf("after a restart: %+v", got)
	}
	start := time.Now()
	res, err = ws.Exec(t.Context(), opsapi.ExecRequest{Timeout: time.Second,
		Command: `env -i setsid sh -c 'exec sleep 4242' </dev/null >/dev/null 2>&1 & sleep 60`})
	if err != nil || !res.TimedOut {
		t.Fatalf("the call was not ended by its deadline: %+v %v", res, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the kill took %v", d)
	}
	if !eventually(5*time.Second, func() bool {
		r, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: `pgrep -f 'sleep[ ]4242'`})
		return err == nil && r.ExitCode == 1
	}) {
		t.Error("the env -i setsid escapee outlived its call's kill")
	}
}

// TestNoSilentFallbackWhenTheAgentCannotStart: a workspace whose agent
// cannot be started again answers ErrUnavailable and says why in its
// Transport; its commands never go to the engine's exec, where a kill
// misses what left the process group.
func TestNoSilentFallbackWhenTheAgentCannotStart(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	sh(t, ws, "true")
	// Nothing in the workspace can do this; the test stands in for
	// whatever else keeps an agent from starting.
	if err := os.RemoveAll(ws.AgentDir()); err != nil {
		t.Fatal(err)
	}
	killAgent(t, ws)
	var out strings.Builder
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: `echo ran`, Output: &out})
	if !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("with no agent to be had: %+v %q %v, want ErrUnavailable", res, out.String(), err)
	}
	if got := ws.Transport(); !got.Agent || !strings.Contains(got.Detail, "could not be started") {
		t.Errorf("Transport: %+v", got)
	}
	if _, err := ws.Stat(t.Context(), "/"); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Errorf("a file operation: %v, want ErrUnavailable", err)
	}
}
