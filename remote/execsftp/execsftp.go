package execsftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// Script starts the SFTP server on the command's stdio: sh -c Script
// wsbroker SERVER... It reports the account's ids and then execs the
// first SERVER that is an executable file, naming it, all on control
// lines on stderr. Without one it reports "nosftp" and exits 127.
const Script = `while IFS= read -r l; do
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

// StartTimeout bounds starting the server and the SFTP handshake.
const StartTimeout = 30 * time.Second

// Process is the command the server runs as.
type Process interface {
	Stdout() io.Reader
	// Stdin's Close half-closes the stream: the server reads EOF and
	// exits.
	Stdin() io.WriteCloser
	// Done is closed when the command's output has ended.
	Done() <-chan struct{}
	// Close drops the stream.
	Close() error
}

// StartFunc starts argv in the box with its stdin attached and its stderr
// written to stderr (which never blocks).
type StartFunc func(ctx context.Context, argv []string, stderr io.Writer) (Process, error)

// Config describes a Channel.
type Config struct {
	// Op names the operation in errors: "docker.sftp".
	Op string
	// Start starts a command in the box.
	Start StartFunc
	// Servers are the SFTP servers' paths in the box, in the order they
	// are tried.
	Servers []string
	// Where and Hint are in the error when none of them is there: "in
	// the container", and what to do.
	Where, Hint string
	// Logger receives what the server prints; nil discards it.
	Logger *slog.Logger
}

// Channel is a box's SFTP session, opened when needed.
type Channel struct {
	cfg Config
	sem chan struct{} // held while the session is looked at or opened
	cur *session      // guarded by sem
}

// New returns a Channel that opens nothing until it is used.
func New(cfg Config) *Channel {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Channel{cfg: cfg, sem: make(chan struct{}, 1)}
}

// session is one SFTP session over the stdio of one command.
type session struct {
	p      Process
	client *sftp.Client
	server string
	id     sftpops.Identity
	dead   atomic.Bool
}

// close ends the session: the server sees its stdin close and exits.
func (s *session) close() {
	s.dead.Store(true)
	s.client.Close()
	s.p.Close()
}

// SFTP is the live session's SFTP client, or a new session's when there
// is none, it died, or it is broken (an sftpops.ClientFunc).
func (c *Channel) SFTP(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
	s, err := c.session(ctx, broken)
	if err != nil {
		return nil, err
	}
	return s.client, nil
}

// Identity is the account the server runs as.
func (c *Channel) Identity(ctx context.Context) (sftpops.Identity, error) {
	s, err := c.session(ctx, nil)
	if err != nil {
		return sftpops.Identity{}, err
	}
	return s.id, nil
}

// Close ends the session, if one is open; the next use opens another.
func (c *Channel) Close() {
	c.sem <- struct{}{}
	s := c.cur
	c.cur = nil
	<-c.sem
	if s != nil {
		s.close()
	}
}

// session returns the live session, opening one when needed.
func (c *Channel) session(ctx context.Context, broken *sftp.Client) (*session, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, opsapi.E(c.cfg.Op, "", nil, ctx.Err())
	}
	defer func() { <-c.sem }()
	s := c.cur
	if s != nil && !s.dead.Load() && s.client != broken {
		return s, nil
	}
	if s != nil {
		s.close()
		c.cur = nil
		c.cfg.Logger.Info("sftp channel lost; starting a new one")
	}
	s, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	c.cur = s
	return s, nil
}

// open starts the SFTP server in a command and shakes hands.
func (c *Channel) open(ctx context.Context) (*session, error) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	ctl := newControlWriter(c.cfg.Logger)
	p, err := c.cfg.Start(ctx, append([]string{"sh", "-c", Script, "wsbroker"}, c.cfg.Servers...), ctl)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	fail := func(err error) (*session, error) {
		p.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return nil, opsapi.E(c.cfg.Op, "", opsapi.ErrUnavailable, err)
	}
	s := &session{p: p}
	if err := c.handshake(ctx, s, ctl); err != nil {
		return fail(err)
	}
	client, err := sftp.NewClientPipe(p.Stdout(), p.Stdin(), sftp.UseConcurrentWrites(true))
	if err != nil {
		return fail(fmt.Errorf("sftp handshake with %s: %w", s.server, err))
	}
	s.client = client
	go func() {
		<-p.Done()
		s.dead.Store(true)
	}()
	c.cfg.Logger.Debug("sftp channel open", "server", s.server, "uid", s.id.UID, "took", time.Since(begin))
	return s, nil
}

// handshake reads the script's control lines until it names its server,
// filling in s's server and the account's ids.
func (c *Channel) handshake(ctx context.Context, s *session, ctl *controlWriter) error {
	var gids []int
	for s.server == "" {
		var line string
		select {
		case line = <-ctl.lines:
		case <-s.p.Done():
			select {
			case line = <-ctl.lines:
			default:
				return errors.New("the sftp server's command ended before it started")
			}
		case <-ctx.Done():
			return errors.New("timed out starting the sftp server")
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "nosftp":
			return fmt.Errorf("no sftp server %s (looked for %s); %s", c.cfg.Where, strings.Join(c.cfg.Servers, ", "), c.cfg.Hint)
		case f[0] == "server" && len(f) == 2:
			s.server = f[1]
		case f[0] == "Uid:" && len(f) >= 3:
			s.id.UID, _ = strconv.Atoi(f[2]) // effective
		case f[0] == "Gid:" && len(f) >= 3:
			g, _ := strconv.Atoi(f[2])
			gids = append([]int{g}, gids...)
		case f[0] == "Groups:":
			for _, v := range f[1:] {
				if g, err := strconv.Atoi(v); err == nil {
					gids = append(gids, g)
				}
			}
		}
	}
	for _, g := range gids {
		if !slices.Contains(s.id.GIDs, g) {
			s.id.GIDs = append(s.id.GIDs, g)
		}
	}
	return nil
}
