package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// workspaceKey marks every process of a workspace.
const workspaceKey = "WSBROKER_WORKSPACE"

// box is a workspace's directory on its host, as remote.Workspace reaches
// it (its Transport and Fallback): commands through the host connection's
// agent, else in a session each; files over the connection's SFTP.
type box struct {
	*host
	owned  bool   // Create made the directory; Destroy removes it
	marker string // in the environment of every process of the workspace
	ws     *remote.Workspace
}

// newWorkspace is the workspace at root on h. Its marker is unique to
// the host, account and directory.
func (b *Backend) newWorkspace(h *host, id, root string, owned bool) *remote.Workspace {
	sum := sha256.Sum256([]byte(h.addr + "\x00" + h.user + "\x00" + root))
	x := &box{host: h, owned: owned,
		marker: workspaceKey + "=" + id + "@" + hex.EncodeToString(sum[:8])}
	x.ws = remote.New(remote.Config{
		Op: "ssh", ID: id, Root: root, Where: "on host " + h.addr,
		Logger: h.log.With("workspace", id), Exec: b.cfg.Exec,
		NoAgent: b.noAgent, Fallback: x, SFTPAlways: true, SharedAgent: true,
		Env:       []string{"LANG=C.UTF-8", "TERM=dumb", x.marker},
		SearchEnv: []string{x.marker}, ReservedEnv: []string{workspaceKey},
		HostCwd: true,
	}, x)
	return x.ws
}

// StartAgent reaches the agent of the host's live connection, shared by
// its workspaces (remote.Transport). Without one the workspace's commands
// run in a session each until the next connection.
func (x *box) StartAgent(ctx context.Context) (*agentclient.Client, error) {
	c, err := x.get(ctx)
	switch {
	case err != nil:
		return nil, err
	case c.agent == nil:
		return nil, remote.NoAgent(c.noAgent)
	case c.agent.IsClosed():
		return nil, remote.NoAgent("the agent's session ended; commands run in a session each until the next connection")
	}
	return c.agent, nil
}

// Vanished is remote.Transport's: a directory removed behind the
// broker's back is not looked for.
func (x *box) Vanished(context.Context) string { return "" }

// Destroy kills every process carrying the workspace's marker and, when
// Create made the directory, removes it (remote.Transport's).
func (x *box) Destroy(ctx context.Context) error {
	killed, err := x.runner.KillMarked(ctx, x.marker)
	errs := []error{err}
	if x.owned {
		_, rerr := x.Run(ctx, []string{"rm", "-rf", "--", x.ws.Root()})
		errs = append(errs, rerr)
	}
	err = errors.Join(errs...)
	x.ws.Logger().Info("workspace destroyed", "killed", killed, "removed", x.owned, "err", err)
	if err != nil {
		return opsapi.E("ssh.Destroy", x.ws.ID(), nil, err)
	}
	return nil
}

// Exec runs a command in a session of its own under the remoteexec
// wrapper, marked as the workspace's (remote.Fallback's). A deadline or
// cancel kills the whole remote tree through a second session; a command
// lost with its connection is killed after the reconnect.
func (x *box) Exec(ctx context.Context, req opsapi.ExecRequest, cwd string) (opsapi.ExecResult, error) {
	return x.runner.Exec(ctx, req, cwd, x.marker)
}

// The ssh backend serves every tool, realpath, the tree operations and
// Destroy through remote.Workspace.
var (
	_ opsapi.Backend   = (*Backend)(nil)
	_ remote.Transport = (*box)(nil)
	_ remote.Fallback  = (*box)(nil)
)
