package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wsbroker/wsbroker/agent/agentclient"
	"github.com/wsbroker/wsbroker/backends/shared/execpump"
)

// agentDir is the pod's volume for the agent's binary.
const agentDir = "/.wsbroker"

// agentDirSize bounds that volume: the binary, and one being copied.
const agentDirSize = 64 << 20

// agentStartTimeout bounds copying and starting an agent.
const agentStartTimeout = time.Minute

// agentPath is where the agent of this broker's build lives in a pod.
func (b *Backend) agentPath() string { return agentDir + "/agent-" + b.agent.hash }

// installScript copies stdin to $1 unless a file of size $2 is there. The
// shell stays alive, its stdout open, until the copy is done: the
// container runtime stops passing stdin to a process that closed its
// stdout, which would cut the binary short.
const installScript = `set -e
if [ -x "$1" ] && [ "$(wc -c < "$1")" = "$2" ]; then echo have; exit 0; fi
t="$1.tmp.$$"
cat > "$t"
chmod 0500 "$t"
mv -f "$t" "$1"
echo "copied $(wc -c < "$1")"`

// installAgent copies the agent into the pod once per build (its name
// holds its content's hash), checking that every byte arrived.
func (w *Workspace) installAgent(ctx context.Context) error {
	b := w.b
	fi, err := os.Stat(b.agent.path)
	if err != nil {
		return err
	}
	size := strconv.FormatInt(fi.Size(), 10)
	f, err := os.Open(b.agent.path)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := b.podOutput(ctx, w.pod, []string{"/bin/sh", "-c", installScript, "sh", b.agentPath(), size}, f)
	if err != nil {
		return fmt.Errorf("copying the agent into the pod: %w", err)
	}
	switch strings.TrimSpace(out) {
	case "have", "copied " + size:
		return nil
	}
	return fmt.Errorf("copying the agent into the pod: %q, want %s bytes", strings.TrimSpace(out), size)
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
	go func() {
		err := w.b.podExec(streamCtx, w.pod, []string{w.b.agentPath(), "serve", "--stdio"}, inR, outW, stderr)
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
	c, err := agentclient.New(ctx, &streamConn{r: outR, w: inW, stop: stop})
	if err != nil {
		stop()
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	w.logger.Debug("agent started", "pod", w.pod)
	return c, nil
}

// streamConn is an exec stream's stdout and stdin as one connection.
type streamConn struct {
	r    *io.PipeReader
	w    *io.PipeWriter
	stop context.CancelFunc
}

func (c *streamConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *streamConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the exec stream: the agent sees its stdin end and exits,
// killing what its commands left.
func (c *streamConn) Close() error {
	c.stop()
	c.w.Close()
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
