package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// ClientFunc returns the live connection, dialing one when there is none.
// When broken is the live one (its transport died before that was seen),
// it drops it and dials anew. Errors wrap opsapi.ErrUnavailable when the
// host cannot be reached.
type ClientFunc func(ctx context.Context, broken *ssh.Client) (*ssh.Client, error)

// Sessions runs commands on one account's connections, a session each.
type Sessions struct {
	client ClientFunc
	where  string // host:port, in errors
	log    *slog.Logger

	execSlots chan struct{} // commands and searches
	ctlSlots  chan struct{} // short commands (kills), and the kill helper

	mu  sync.Mutex
	cur *perConn // the connection last attached
}

// perConn is what Sessions keeps for one connection.
type perConn struct {
	client *ssh.Client
	killer *remoteexec.KillHelper // nil when it could not start

	// spare is a session channel opened ahead, on one of the command
	// slots, for the next command: it then waits for its exec alone, not
	// for the channel's open too (a round trip of a fifth of a ms and up).
	spareMu sync.Mutex
	spare   *chanProc
	filling bool
}

// MinSessions is the least MaxSessions New accepts: the SFTP channel, two
// for kills and one for commands.
const MinSessions = 4

// New returns the sessions of connections that client gives, at most
// maxSessions (the server's MaxSessions, at least MinSessions) at a time,
// the SFTP channel included. where names the host in errors.
func New(client ClientFunc, maxSessions int, where string, logger *slog.Logger) *Sessions {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Sessions{
		client: client, where: where, log: logger,
		execSlots: make(chan struct{}, max(maxSessions, MinSessions)-3),
		ctlSlots:  make(chan struct{}, 2),
	}
}

// Attach starts the kill helper on a new connection c before anything
// else uses it; the caller's connection manager calls it for each one.
func (s *Sessions) Attach(c *ssh.Client) {
	pc := &perConn{client: c, killer: s.startKillHelper(c)}
	s.mu.Lock()
	old := s.cur
	s.cur = pc
	s.mu.Unlock()
	if old != nil && old.killer != nil {
		old.killer.Close()
	}
}

// attached is what is kept for c, nil when c is not the connection last
// attached.
func (s *Sessions) attached(c *ssh.Client) *perConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.client == c {
		return s.cur
	}
	return nil
}

// channel opens a bare session channel, waiting for a slot of sem; its
// requests (exit-status among them) are the process's to read.
func (s *Sessions) channel(ctx context.Context, sem chan struct{}) (*chanProc, error) {
	var p *chanProc
	release, err := s.openSlot(ctx, sem, func(c *ssh.Client) error {
		ch, reqs, err := c.OpenChannel("session", nil)
		if err == nil {
			p = newChanProc(ch, reqs, nil)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	p.setRelease(release)
	return p, nil
}

// openSlot takes a slot of sem and runs open on the live connection.
func (s *Sessions) openSlot(ctx context.Context, sem chan struct{}, open func(*ssh.Client) error) (func(), error) {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	release := func() { once.Do(func() { <-sem }) }
	c, err := s.client(ctx, nil)
	if err != nil {
		release()
		return nil, err
	}
	// A server at its MaxSessions (counting sessions of other
	// clients of the account, or closes it has not processed yet)
	// rejects the channel: wait a little and try again.
	var oce *ssh.OpenChannelError
	redialed := false
	for attempt := 0; ; attempt++ {
		err := open(c)
		if err == nil {
			return release, nil
		}
		if !errors.As(err, &oce) && !redialed && ctx.Err() == nil {
			// The transport died before keepalives noticed (EOF):
			// drop it and dial once more, so the first call after a
			// lost connection does not fail.
			redialed = true
			if c, err = s.client(ctx, c); err != nil {
				release()
				return nil, err
			}
			continue
		}
		if !errors.As(err, &oce) || attempt == 40 || ctx.Err() != nil {
			release()
			return nil, opsapi.E("ssh.session", s.where, opsapi.ErrUnavailable, err)
		}
		time.Sleep(time.Duration(5+5*min(attempt, 9)) * time.Millisecond)
	}
}

// Start is remoteexec's StartFunc: one session per command, read at the
// channel level so that the exit status is seen when it arrives, before
// the output ends.
func (s *Sessions) Start(ctx context.Context, argv []string) (remoteexec.Process, error) {
	p, err := s.start(ctx, argv)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Sessions) start(ctx context.Context, argv []string) (*chanProc, error) {
	line := CommandLine(argv)
	if p := s.takeSpare(); p != nil {
		err := p.exec(line)
		if err == nil {
			s.refillSpare()
			return p, nil
		}
		// The spare went stale (the connection was lost, or the server
		// closed it): open one as usual.
		p.Close()
	}
	p, err := s.channel(ctx, s.execSlots)
	if err != nil {
		return nil, err
	}
	if err := p.exec(line); err != nil {
		p.Close()
		return nil, opsapi.E("ssh.exec", s.where, opsapi.ErrUnavailable, err)
	}
	s.refillSpare()
	return p, nil
}

// takeSpare returns the attached connection's spare channel, or nil.
func (s *Sessions) takeSpare() *chanProc {
	s.mu.Lock()
	pc := s.cur
	s.mu.Unlock()
	if pc == nil {
		return nil
	}
	pc.spareMu.Lock()
	p := pc.spare
	pc.spare = nil
	pc.spareMu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil // closed under us; its slot is already released
	default:
		return p
	}
}

// refillSpare opens the next command's channel in the background when a
// command slot is free; with every slot busy there is no spare, so it
// never keeps a command waiting.
func (s *Sessions) refillSpare() {
	s.mu.Lock()
	pc := s.cur
	s.mu.Unlock()
	if pc == nil {
		return
	}
	pc.spareMu.Lock()
	if pc.spare != nil || pc.filling {
		pc.spareMu.Unlock()
		return
	}
	pc.filling = true
	pc.spareMu.Unlock()
	go func() {
		var p *chanProc
		select {
		case s.execSlots <- struct{}{}:
			var once sync.Once
			release := func() { once.Do(func() { <-s.execSlots }) }
			if ch, reqs, err := pc.client.OpenChannel("session", nil); err == nil {
				p = newChanProc(ch, reqs, release)
			} else {
				release()
			}
		default:
		}
		pc.spareMu.Lock()
		pc.filling = false
		if p != nil && s.attached(pc.client) == pc {
			pc.spare, p = p, nil
		}
		pc.spareMu.Unlock()
		if p != nil {
			p.Close()
		}
	}()
}

// Run is remoteexec's RunFunc: a short command on its own session slot.
// A non-zero exit is an error. The builtin-only kill, which remoteexec
// runs after the kill script (a fork bomb at the account's process limit
// lets no new session start), goes to the connection's kill helper.
func (s *Sessions) Run(ctx context.Context, argv []string) ([]byte, error) {
	if mode, pg, marker, ok := remoteexec.NoForkKillArgs(argv); ok {
		if c, err := s.client(ctx, nil); err == nil {
			if pc := s.attached(c); pc != nil && pc.killer != nil {
				out, err := pc.killer.Kill(ctx, mode, pg, marker)
				if err == nil {
					return out, nil
				}
				s.log.Warn("the kill helper failed; trying a new session", "err", err)
			}
		}
	}
	p, err := s.channel(ctx, s.ctlSlots)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	if err := p.exec(CommandLine(argv)); err != nil {
		return nil, opsapi.E("ssh.exec", s.where, opsapi.ErrUnavailable, err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	out, rerr := io.ReadAll(io.LimitReader(p.Stdout(), 1<<20))
	_, _ = io.Copy(io.Discard, p.Stdout())
	st, ok := <-p.exited
	switch {
	case !ok:
		return out, opsapi.E("ssh.exec", s.where, opsapi.ErrUnavailable, errors.Join(errors.New("the session ended without an exit status"), rerr))
	case st.Code != 0:
		return out, fmt.Errorf("%s exited with %d", argv[0], st.Code)
	}
	return out, nil
}

// killHelperStart bounds the kill helper's start.
const killHelperStart = 10 * time.Second

// startKillHelper starts remoteexec's kill helper in a session of its own
// on c, holding one of the kill slots for the life of the connection, or
// returns nil (logged) when it cannot.
func (s *Sessions) startKillHelper(c *ssh.Client) *remoteexec.KillHelper {
	select {
	case s.ctlSlots <- struct{}{}:
	default:
		s.log.Warn("no session slot for the kill helper; a fork bomb at the account's process limit may outlive its deadline")
		return nil
	}
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		<-s.ctlSlots
		s.log.Warn("kill helper: opening its session", "err", err)
		return nil
	}
	p := newChanProc(ch, reqs, func() { <-s.ctlSlots })
	go func() { _, _ = io.Copy(io.Discard, ch.Stderr()) }()
	ctx, cancel := context.WithTimeout(context.Background(), killHelperStart)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ch.Close() })
	var k *remoteexec.KillHelper
	if err = p.request(CommandLine([]string{"bash", "-c", remoteexec.KillHelperScript})); err == nil {
		k, err = remoteexec.StartKillHelper(ctx, ch)
	}
	stop()
	if err != nil {
		ch.Close()
		s.log.Warn("kill helper did not start", "err", err)
		return nil
	}
	return k
}
