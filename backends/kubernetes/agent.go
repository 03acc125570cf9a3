package kubernetes

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/agentclient"
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

// installScript copies stdin to $1, made readable and executable by all
// (the workspace's user runs it) and writable by none, and says how many
// bytes arrived. The shell stays alive, its stdout
// open, until the copy is done: the container runtime stops passing
// stdin to a process that closed its stdout, which would cut the binary
// short with no error.
const installScript = `set -e
t="$1.tmp.$$"
cat > "$t"
chmod 0555 "$t"
mv -f "$t" "$1"
echo "copied $(wc -c < "$1")"`

// installAgent copies the agent into the pod unless this build is there
// (its name holds its content's hash), checking that every byte arrived.
// The check is an exec of its own: a process that exits while its stdin
// is still being sent leaves the stream waiting.
func (w *podBox) installAgent(ctx context.Context) error {
	b := w.b
	fi, err := os.Stat(b.agent.Path)
	if err != nil {
		return err
	}
	size := strconv.FormatInt(fi.Size(), 10)
	have, err := b.podOutput(ctx, w.pod, containerName, []string{"/bin/sh", "-c", `[ -x "$1" ] && wc -c < "$1" || true`, "sh", b.agentPath()}, nil)
	if err != nil {
		return fmt.Errorf("looking for the agent in the pod: %w", err)
	}
	if strings.TrimSpace(have) == size {
		return nil
	}
	f, err := os.Open(b.agent.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := b.podOutput(ctx, w.pod, w.store, []string{"/bin/sh", "-c", installScript, "sh", b.agentPath()}, f)
	if err != nil {
		return fmt.Errorf("copying the agent into the pod: %w", err)
	}
	if got := strings.TrimSpace(out); got != "copied "+size {
		return fmt.Errorf("copying the agent into the pod: %q, want %s bytes", got, size)
	}
	return nil
}

// StartAgent copies the agent into the pod when needed and starts it on
// an exec stream of its own, whose stdin and stdout are the connection
// (remote.StartStdio).
func (w *podBox) StartAgent(ctx context.Context) (*agentclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	if err := w.installAgent(ctx); err != nil {
		return nil, err
	}
	c, conn, err := remote.StartStdio(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
		return w.b.podExec(ctx, w.pod, containerName, []string{w.b.agentPath(), "serve", "--stdio"}, stdin, stdout, stderr)
	})
	if err != nil {
		return nil, err
	}
	w.stream.Store(conn)
	w.Logger().Debug("agent started")
	return c, nil
}
