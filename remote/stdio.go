package remote

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// StdioRun runs the agent (`serve --stdio`) with stdin, stdout and stderr
// as given until it ends or ctx does: one long exec or session.
type StdioRun func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error

// StartStdio starts the agent with run and speaks its protocol over the
// process's stdin and stdout, which are the connection: it ends when
// either side closes it. The head of the agent's stderr is in the error
// that ends it.
func StartStdio(ctx context.Context, run StdioRun) (*agentclient.Client, *StdioConn, error) {
	streamCtx, stop := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &execpump.Head{Max: 4096}
	conn := &StdioConn{r: outR, w: inW, stop: stop, ended: make(chan struct{})}
	go func() {
		defer close(conn.ended)
		err := run(streamCtx, inR, outW, stderr)
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
		return nil, nil, fmt.Errorf("starting the agent: %w", err)
	}
	return c, conn, nil
}

// StdioConn is an agent process's stdout and stdin as one connection.
type StdioConn struct {
	r     *io.PipeReader
	w     *io.PipeWriter
	stop  context.CancelFunc
	ended chan struct{} // closed when the process's stream has ended
	cut   atomic.Bool   // Close need not wait: the box is being removed
}

func (c *StdioConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *StdioConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// stdioCloseWait is how long Close lets the agent end its stream itself.
const stdioCloseWait = 5 * time.Second

// Close ends the agent's stdin, so the agent kills what its commands
// left and exits, which ends the stream as a finished process; only a
// stream that does not end within a few seconds (or at once after Cut)
// is cut off.
func (c *StdioConn) Close() error {
	c.w.Close()
	wait := stdioCloseWait
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

// Cut makes Close end the stream without waiting for the agent: its box
// is being removed, and the agent with it.
func (c *StdioConn) Cut() { c.cut.Store(true) }
