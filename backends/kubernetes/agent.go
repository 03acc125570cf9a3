package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
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
func (b *Backend) agentPath() string { return agentDir + "/agent-" + b.agent.hash }

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
func (w *Workspace) installAgent(ctx context.Context) error {
	b := w.b
	fi, err := os.Stat(b.agent.path)
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
	f, err := os.Open(b.agent.path)
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

// startAgent starts the agent on an exec stream of its own and speaks its
// protocol over that stream's stdin and stdout. The stream is the
// connection: it ends when either side closes it.
func (w *Workspace) startAgent(ctx context.Context) (*agentclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	if err := w.installAgent(ctx); err != nil {
		return nil, err
	}
	streamCtx, stop := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &execpump.Head{Max: 4096}
	conn := &streamConn{r: outR, w: inW, stop: stop, ended: make(chan struct{})}
	go func() {
		defer close(conn.ended)
		err := w.b.podExec(streamCtx, w.pod, containerName, []string{w.b.agentPath(), "serve", "--stdio"}, inR, outW, stderr)
		if err == nil {
			err = io.EOF
		}
		if s := strings.TrimSpace(stderr.String()); s != "" {
			err = fmt.Errorf("%w: %s", err, s)
		}
		outW.CloseWithError(err)
		inR.CloseWithError(err)
		stop()
	}()
	c, err := agentclient.New(ctx, conn)
	if err != nil {
		stop()
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	w.agentConn.Store(conn)
	w.logger.Debug("agent started", "pod", w.pod)
	return c, nil
}

// streamConn is an exec stream's stdout and stdin as one connection.
type streamConn struct {
	r     *io.PipeReader
	w     *io.PipeWriter
	stop  context.CancelFunc
	ended chan struct{} // closed when the exec stream has ended
	cut   atomic.Bool   // Close need not wait: the pod is being deleted
}

func (c *streamConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *streamConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// streamCloseWait is how long Close lets the agent end its stream itself.
const streamCloseWait = 5 * time.Second

// Close ends the agent's stdin, so the agent kills what its commands
// left and exits, which ends the stream as a finished exec; only a stream
// that does not end in streamCloseWait is cut (client-go then logs its
// copies' errors).
func (c *streamConn) Close() error {
	c.w.Close()
	wait := streamCloseWait
	if c.cut.Load() {
		wait = 0
	}
	select {
	case <-c.ended:
	case <-time.After(wait):
	}
	c.stop()
	c.r.Close()
	return nil
}

// agentClient is the workspace's live agent connection, started when
// there is none (the first call after a create or a broker restart, or
// after the stream broke). Concurrent callers share one start.
func (w *Workspace) agentClient(ctx context.Context) (*agentclient.Client, error) {
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return c, nil
	}
	select {
	case w.agentSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-w.agentSem }()
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return c, nil
	}
	if err := w.gone("kubernetes.agent", ""); err != nil {
		return nil, err
	}
	c, err := w.startAgent(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		if gerr := w.checkPod(ctx); gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("the workspace's agent: %w", err)
	}
	w.agentLive.Store(c)
	return c, nil
}

// closeAgent ends the agent connection, if one is open.
func (w *Workspace) closeAgent() {
	if c := w.agentLive.Swap(nil); c != nil {
		c.Close()
	}
}
