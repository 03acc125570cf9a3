package docker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// InjectedSFTPServer is where the broker's own SFTP server is mounted,
// read-only, in every container created while one is configured.
const InjectedSFTPServer = "/.wsbroker/sftp-server"

// channelScript starts the SFTP server on the exec's stdio: sh -c
// channelScript wsbroker SERVER... It first reports the account's ids
// (from its own /proc status: no program needed) and then execs the first
// SERVER that is an executable file, naming it, all on control lines on
// stderr. Without one it reports "nosftp" and exits 127.
const channelScript = `while IFS= read -r l; do
	case $l in Uid:*|Gid:*|Groups:*) printf '@wsbroker %s\n' "$l" >&2;; esac
done < /proc/$$/status
for s in "$@"; do
	if [ -f "$s" ] && [ -x "$s" ]; then
		printf '@wsbroker server %s\n' "$s" >&2
		exec "$s"
	fi
done
echo '@wsbroker nosftp' >&2
exit 127
`

// channelStartTimeout bounds starting the server and the SFTP handshake.
const channelStartTimeout = 30 * time.Second

// channel is one SFTP session over the stdio of one long-lived exec.
type channel struct {
	p      *execProc
	client *sftp.Client
	server string
	id     sftpops.Identity
	dead   atomic.Bool
}

// close ends the session: the server sees its stdin close and exits.
func (c *channel) close() {
	c.dead.Store(true)
	c.client.Close()
	c.p.Close()
}

// sftpClient is the workspace's sftpops.ClientFunc: the live channel, or a
// new one when there is none, it died, or the caller found it broken.
// Concurrent callers share one start.
func (w *Workspace) sftpClient(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
	a, err := w.agentClient(ctx, "docker.sftp")
	if err != nil {
		return nil, err
	}
	if a != nil {
		sc, err := a.SFTP(ctx, broken)
		if err != nil {
			return nil, opsapi.E("docker.sftp", "", nil, fmt.Errorf("sftp over the agent: %w", err))
		}
		return sc, nil
	}
	c, err := w.channel(ctx, broken)
	if err != nil {
		return nil, err
	}
	return c.client, nil
}

// readFile opens a file as one raw stream through the agent (see
// sftpops.Options.ReadFile); without the agent, Open reads over SFTP.
func (w *Workspace) readFile(ctx context.Context, abs string) (io.ReadCloser, error) {
	return idempotentOnAgent(ctx, w, func(a *agentclient.Client) (io.ReadCloser, error) { return a.ReadFile(ctx, abs) })
}

// readDir lists a directory in one round trip through the agent (see
// sftpops.Options.ReadDir); without the agent the listing is SFTP's.
func (w *Workspace) readDir(ctx context.Context, abs string) ([]opsapi.FileInfo, error) {
	return idempotentOnAgent(ctx, w, func(a *agentclient.Client) ([]opsapi.FileInfo, error) { return a.ReadDir(ctx, abs) })
}

// idempotentOnAgent runs call on the agent's connection, and once more on
// a new one when it found the connection lost, as SFTP's calls are
// retried. In a workspace without the agent it answers
// errors.ErrUnsupported, which sends sftpops back to SFTP.
func idempotentOnAgent[T any](ctx context.Context, w *Workspace, call func(*agentclient.Client) (T, error)) (T, error) {
	var zero T
	a, err := w.agentClient(ctx, "docker.files")
	if err != nil || a == nil {
		return zero, cmp.Or(err, errors.ErrUnsupported)
	}
	v, err := call(a)
	if err != nil && a.IsClosed() && ctx.Err() == nil {
		if a, err = w.agentClient(ctx, "docker.files"); err != nil {
			return zero, err
		}
		return call(a)
	}
	return v, err
}

// writeFile replaces a file in one round trip through the agent (see
// sftpops.Options.WriteFile); in a workspace without the agent the
// write is SFTP's. Not retried on a lost connection: r may be half read.
func (w *Workspace) writeFile(ctx context.Context, abs string, r io.Reader, sync bool) error {
	a, err := w.agentClient(ctx, "docker.WriteFile")
	if err != nil || a == nil {
		return cmp.Or(err, errors.ErrUnsupported)
	}
	return a.WriteFile(ctx, abs, r, sync)
}

// channel returns the live channel, opening one when needed.
func (w *Workspace) channel(ctx context.Context, broken *sftp.Client) (*channel, error) {
	select {
	case w.chanSem <- struct{}{}:
	case <-ctx.Done():
		return nil, opsapi.E("docker.sftp", "", nil, ctx.Err())
	}
	defer func() { <-w.chanSem }()
	if err := w.gone("docker.sftp", ""); err != nil {
		return nil, err
	}
	c := w.ch
	if c != nil && !c.dead.Load() && c.client != broken {
		return c, nil
	}
	if c != nil {
		c.close()
		w.ch = nil
		w.logger.Info("sftp channel lost; starting a new one")
	}
	c, err := w.openChannel(ctx)
	if err != nil {
		return nil, err
	}
	w.ch = c
	return c, nil
}

// openChannel starts the SFTP server in an exec and shakes hands.
func (w *Workspace) openChannel(ctx context.Context) (*channel, error) {
	const op = "docker.sftp"
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, channelStartTimeout)
	defer cancel()
	ctl := newControlWriter(w.logger)
	argv := append([]string{"sh", "-c", channelScript, "wsbroker"}, w.b.sftpServers()...)
	p, err := w.startExec(ctx, execOpts{argv: argv, stdin: true, stderr: ctl})
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	fail := func(err error) (*channel, error) {
		p.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return nil, opsapi.E(op, "", opsapi.ErrUnavailable, err)
	}

	c := &channel{p: p}
	var gids []int
	for c.server == "" {
		var line string
		select {
		case line = <-ctl.lines:
		case <-p.demuxed:
			select {
			case line = <-ctl.lines:
			default:
				return fail(errors.New("the sftp server exec ended before it started"))
			}
		case <-ctx.Done():
			return fail(errors.New("timed out starting the sftp server"))
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "nosftp":
			return fail(fmt.Errorf("no sftp server in the container (looked for %s); configure agentBinary or use an image with OpenSSH's sftp-server",
				strings.Join(w.b.sftpServers(), ", ")))
		case f[0] == "server" && len(f) == 2:
			c.server = f[1]
		case f[0] == "Uid:" && len(f) >= 3:
			c.id.UID, _ = strconv.Atoi(f[2]) // effective
		case f[0] == "Gid:" && len(f) >= 3:
			g, _ := strconv.Atoi(f[2])
			gids = append([]int{g}, gids...)
		case f[0] == "Groups:":
			for _, s := range f[1:] {
				if g, err := strconv.Atoi(s); err == nil {
					gids = append(gids, g)
				}
			}
		}
	}
	c.id.GIDs = dedup(gids)

	client, err := sftp.NewClientPipe(p.Stdout(), stdinCloser{p}, sftp.UseConcurrentWrites(true))
	if err != nil {
		return fail(fmt.Errorf("sftp handshake with %s: %w", c.server, err))
	}
	c.client = client
	go func() {
		<-p.demuxed
		c.dead.Store(true)
	}()
	w.logger.Debug("sftp channel open", "server", c.server, "uid", c.id.UID, "took", time.Since(begin))
	return c, nil
}

// stdinCloser is the SFTP client's writer: the exec's stdin. Closing it
// half-closes the connection, so the server reads EOF and exits.
type stdinCloser struct{ p *execProc }

func (s stdinCloser) Write(b []byte) (int, error) { return s.p.conn.Write(b) }

func (s stdinCloser) Close() error {
	if cw, ok := s.p.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.p.conn.Close()
}

func dedup(xs []int) []int {
	var out []int
	seen := map[int]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// controlWriter is the channel exec's stderr: "@wsbroker " lines go to
// lines (the first few; later ones are logged), anything else the server
// prints is logged, a line at a time and cut at 1 KiB. It never blocks.
type controlWriter struct {
	log   interface{ Warn(string, ...any) }
	lines chan string

	mu   sync.Mutex
	buf  []byte
	drop bool // discarding the rest of an over-long line
}

func newControlWriter(log interface{ Warn(string, ...any) }) *controlWriter {
	return &controlWriter{log: log, lines: make(chan string, 16)}
}

const maxControlLine = 1024

func (c *controlWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !c.drop {
			room := maxControlLine - len(c.buf)
			if len(chunk) > room {
				c.buf = append(c.buf, chunk[:room]...)
				c.drop = true
			} else {
				c.buf = append(c.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		c.line(string(c.buf))
		c.buf, c.drop = c.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (c *controlWriter) line(l string) {
	if rest, ok := strings.CutPrefix(l, "@wsbroker "); ok {
		select {
		case c.lines <- rest:
			return
		default:
		}
	}
	if strings.TrimSpace(l) != "" {
		c.log.Warn("sftp server says", "line", l)
	}
}

var _ io.Writer = (*controlWriter)(nil)

// identity is the account file operations run as: the agent's in a
// workspace with one, else the SFTP channel's.
func (w *Workspace) identity(ctx context.Context) (sftpops.Identity, error) {
	a, err := w.agentClient(ctx, "docker.identity")
	if err != nil {
		return sftpops.Identity{}, err
	}
	if a != nil {
		id, err := a.Identity(ctx)
		if err != nil {
			return sftpops.Identity{}, opsapi.E("docker.identity", "", nil, fmt.Errorf("asking the agent: %w", err))
		}
		return sftpops.Identity{UID: id.UID, GIDs: id.GIDs}, nil
	}
	c, err := w.channel(ctx, nil)
	if err != nil {
		return sftpops.Identity{}, err
	}
	return c.id, nil
}
