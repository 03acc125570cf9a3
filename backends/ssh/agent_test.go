package ssh_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestCommandsRunThroughTheAgent: the agent is uploaded by content hash
// and a command's parent is its reaper; a second backend reuses the
// upload (the account's cache keeps what earlier runs left).
func TestCommandsRunThroughTheAgent(t *testing.T) {
	srv := sshtest.Start(t)
	cached := -1
	for i := 0; i < 2; i++ {
		b := newBackend(t, srv)
		ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: fmt.Sprint("agent", i), Options: rootOpts(srv, filepath.Join(srv.WorkDir(t), fmt.Sprint("ws", i)))})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		res, err := ws.(opsapi.BashOperations).Exec(context.Background(), opsapi.ExecRequest{Command: `tr '\0' ' ' < /proc/$PPID/cmdline; echo; ls ~/.cache/wsbroker | wc -l`, Output: &out})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if !strings.Contains(lines[0], " reap ") {
			t.Fatalf("the command's parent is %q, want the agent's reaper", out.String())
		}
		n := lines[len(lines)-1]
		if i == 1 && n != fmt.Sprint(cached) {
			t.Errorf("the second backend uploaded again: %s cached files, %d before", n, cached)
		}
		_, _ = fmt.Sscan(n, &cached)
		if got := ws.(opsapi.TransportReporter).Transport(); got != (opsapi.Transport{Agent: true}) {
			t.Errorf("with the agent up: %+v", got)
		}
	}
	b := newBackend(t, srv, func(c *ssh.Config) { c.InboxAgent = ssh.InboxAgentOff })
	ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: "agent-off", Options: rootOpts(srv, filepath.Join(srv.WorkDir(t), "off"))})
	if err != nil {
		t.Fatal(err)
	}
	if got := ws.(opsapi.TransportReporter).Transport(); got.Agent || got.Detail != "inboxAgent: off in the configuration" {
		t.Errorf("agent off: %+v", got)
	}
}
