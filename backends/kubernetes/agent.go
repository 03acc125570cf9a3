package kubernetes

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// The containers of every pod: the workspace's, where the agent and its
// commands run, and the agent store's, the only one that may write the
// agent's binary.
const (
	containerName      = "workspace"
	storeContainerName = "agent-store"
)

// agentDir is the pod's volume for the agent's binary. The workspace
// container mounts it read-only: only the agent store container, which
// runs as another user (storeUID), writes it. A command cannot replace
// the binary the next agent starts from, nor reach the store's mount
// through /proc (another uid).
const agentDir = "/.wsbroker"

// storeUID is the agent store container's user: never the workspace's.
func storeUID(workspaceUID int64) int64 {
	if workspaceUID == 65532 {
		return 65533
	}
	return 65532
}

// agentDirSize bounds that volume: the binary, and one being copied.
const agentDirSize = 64 << 20

// agentStartTimeout bounds copying and starting an agent.
const agentStartTimeout = time.Minute

// agentPath is where the agent of this broker's build lives in a pod.
func (b *Backend) agentPath() string { return agentDir + "/agent-" + b.agent.Hash[:24] }

// StartAgent copies the agent into the pod when needed and starts it on
// an exec stream of its own, whose stdin and stdout are the connection
// (remote.StartStdio).
func (w *podBox) StartAgent(ctx context.Context) (*agentclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	if err := w.b.pods.Install(ctx, w.pod, containerName, w.store, w.b.agent.Path, w.b.agentPath()); err != nil {
		return nil, fmt.Errorf("installing the agent: %w", err)
	}
	c, conn, err := remote.StartStdio(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
		return w.b.pods.Run(ctx, w.pod, containerName, []string{w.b.agentPath(), "serve", "--stdio"}, stdin, stdout, stderr)
	})
	if err != nil {
		return nil, err
	}
	w.stream.Store(conn)
	w.Logger().Debug("agent started")
	return c, nil
}
