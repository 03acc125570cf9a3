package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/agentsock"
)

// InjectedSFTPServer is where the broker's own binary (the agent, and
// the SFTP server of workspaces without one) is mounted, read-only, in
// every container created while one is configured.
const InjectedSFTPServer = "/.wsbroker/sftp-server"

// AgentRunDir is where a workspace's run directory appears inside its
// container, read-only.
const AgentRunDir = "/.wsbroker/run"

// agentRetry is how long a workspace whose agent could not be started
// answers ErrUnavailable before it tries again.
const agentRetry = 5 * time.Second

// agentSetup is what every workspace's agent shares: whether there is
// one, and the host directory of run directories.
type agentSetup struct {
	on     bool
	why    string // why not, when off
	runDir string
}

// setupAgent decides whether new workspaces get an agent, logging why
// not.
func (b *Backend) setupAgent() {
	c := b.cfg
	if c.Agent == AgentOff {
		b.agent.why = "agent: off in the configuration"
		return
	}
	if b.injectBinary == "" {
		b.agent.why = "no agent binary is injected"
		b.logger.Info("no agent: no binary is injected; commands and files go through the engine's exec")
		return
	}
	run := c.RunDir
	if run == "" {
		sum := sha256.Sum256([]byte(c.Identity))
		run = filepath.Join(os.TempDir(), "wsbroker-run-"+hex.EncodeToString(sum[:6]))
	}
	if err := os.MkdirAll(run, 0o700); err != nil {
		b.agent.why = "the agents' run directory cannot be made"
		b.logger.Warn("no agent: its run directory cannot be made", "dir", run, "err", err)
		return
	}
	b.agent = agentSetup{on: true, runDir: run}
	b.logger.Info("workspaces get the in-box agent", "runDir", run)
}

// agentDirOf is workspace id's run directory on the host, named by a
// hash of the id: a socket's path must fit in 108 bytes, and ids may be
// 128 long.
func (b *Backend) agentDirOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(b.agent.runDir, hex.EncodeToString(sum[:8]))
}

// agentRunDir makes workspace id's run directory, or returns "" (no
// agent for it) when it cannot. It is the broker's, not the container
// user's, and the container sees it read-only: the agent's socket is
// the broker's listening one, so nothing in the workspace can write
// there, fill the host's disk through it or make it unusable.
func (b *Backend) agentRunDir(id string) string {
	if !b.agent.on {
		return ""
	}
	dir := b.agentDirOf(id)
	_ = os.RemoveAll(dir) // a leftover of an earlier workspace of that name
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.logger.Warn("no agent for this workspace: its run directory cannot be made", "workspace", id, "dir", dir, "err", err)
		return ""
	}
	return dir
}

// StartAgent starts the agent in one exec, which connects to a socket
// the broker listens on in the workspace's run directory
// (remote.Transport; package agentsock).
func (x *box) StartAgent(ctx context.Context) (*agentclient.Client, error) {
	return agentsock.Start(ctx, agentsock.Dir{Host: x.agentDir, Box: AgentRunDir}, InjectedSFTPServer,
		func(ctx context.Context, argv []string, stderr io.Writer) (agentsock.Process, error) {
			return x.startExec(ctx, execOpts{argv: argv, stdin: true, stderr: stderr})
		})
}
