package ssh

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// host is one user@address: one SSH connection (with its SFTP channel)
// shared by every workspace there, reconnected when it dies.
type host struct {
	b      *Backend
	addr   string // host:port
	user   string
	log    *slog.Logger
	runner *remoteexec.Runner

	// Sessions are limited per connection by the server; commands wait
	// for a slot, kills have their own.
	execSlots chan struct{}
	ctlSlots  chan struct{}

	mu      sync.Mutex
	cur     *conn         // nil when there is none
	dialing chan struct{} // closed when the running dial ends
	dialErr error
	closed  bool
}

// conn is one live connection.
type conn struct {
	client  *ssh.Client
	sftp    *sftp.Client
	home    string
	id      sftpops.Identity
	dead    atomic.Bool
	killer  *killHelper         // nil when it could not start
	agent   *agentclient.Client // the in-box agent; nil when it could not start
	noAgent string              // why agent is nil

	// spare is a session channel opened ahead, on one of the command
	// slots, for the next command: it then waits for its exec alone, not
	// for the channel's open too (a round trip of a fifth of a ms and up).
	spareMu sync.Mutex
	spare   *chanProc
	filling bool
}

func newHost(b *Backend, addr, user string) *host {
	h := &host{
		b: b, addr: addr, user: user,
		log:       b.logger.With("host", addr, "user", user),
		execSlots: make(chan struct{}, b.cfg.MaxSessions-3),
		ctlSlots:  make(chan struct{}, 2),
	}
	h.runner = remoteexec.New(h.start, h.run, remoteexec.Config{
		Shell:     b.cfg.Shell,
		Env:       []string{"LANG=C.UTF-8", "TERM=dumb"},
		KillGrace: b.cfg.KillGrace,
		DrainIdle: b.cfg.DrainIdle,
		MaxDrain:  b.cfg.MaxDrain,
		Op:        "ssh.Exec",
		// sshd makes each session a new session, and reports the exit
		// status when the command exits.
		TransportExit: true,
	}, h.log)
	return h
}

// get returns the live connection, dialing one when there is none. Calls
// that arrive during a dial share it.
func (h *host) get(ctx context.Context) (*conn, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, opsapi.E("ssh.connect", h.addr, opsapi.ErrUnavailable, errors.New("backend closed"))
		}
		if c := h.cur; c != nil && !c.dead.Load() {
			h.mu.Unlock()
			return c, nil
		}
		if h.dialing == nil {
			h.dialing = make(chan struct{})
			go h.dial()
		}
		wait := h.dialing
		h.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, opsapi.E("ssh.connect", h.addr, nil, ctx.Err())
		}
		h.mu.Lock()
		c, err := h.cur, h.dialErr
		h.mu.Unlock()
		if c == nil || c.dead.Load() {
			if err == nil {
				continue // died again at once; dial anew
			}
			return nil, err
		}
		return c, nil
	}
}

// dial connects, opens the SFTP channel and learns the account, then
// publishes the connection.
func (h *host) dial() {
	c, err := h.connect()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed && c != nil {
		c.client.Close()
		c, err = nil, opsapi.E("ssh.connect", h.addr, opsapi.ErrUnavailable, errors.New("backend closed"))
	}
	if c != nil {
		h.cur = c
		go h.watch(c)
	}
	h.dialErr = err
	close(h.dialing)
	h.dialing = nil
}

func (h *host) connect() (*conn, error) {
	const op = "ssh.connect"
	cfg := h.b.cfg
	auth, err := h.b.authMethods()
	if err != nil {
		return nil, opsapi.E(op, h.addr, opsapi.ErrUnavailable, err)
	}
	cc := &ssh.ClientConfig{
		User:            h.user,
		Auth:            auth,
		HostKeyCallback: h.b.hostKeys,
		Timeout:         cfg.DialTimeout,
	}
	if cfg.InsecureIgnoreHostKey {
		h.log.Warn("INSECURE: host key NOT verified (insecureIgnoreHostKey); anyone on the path can impersonate this host")
	} else {
		cc.HostKeyAlgorithms = knownAlgorithms(h.b.hostKeys, h.addr)
	}
	begin := time.Now()
	nc, err := net.DialTimeout("tcp", h.addr, cfg.DialTimeout)
	if err != nil {
		return nil, opsapi.E(op, h.addr, opsapi.ErrUnavailable, err)
	}
	// The handshake gets the same bound as the dial.
	_ = nc.SetDeadline(time.Now().Add(cfg.DialTimeout)) // a failure shows as the handshake failing
	sc, chans, reqs, err := ssh.NewClientConn(nc, h.addr, cc)
	if err != nil {
		nc.Close()
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			what := "unknown host key (not in knownHostsFiles)"
			if len(ke.Want) > 0 {
				what = "HOST KEY MISMATCH: the host's key differs from known_hosts (possible man-in-the-middle)"
			}
			h.log.Error("host key verification failed", "reason", what)
			return nil, opsapi.E(op, h.addr, opsapi.ErrPermission, fmt.Errorf("host key verification failed: %s: %w", what, err))
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, opsapi.E(op, h.addr, opsapi.ErrPermission, err)
		}
		return nil, opsapi.E(op, h.addr, opsapi.ErrUnavailable, err)
	}
	_ = nc.SetDeadline(time.Time{})
	client := ssh.NewClient(sc, chans, reqs)
	fail := func(err error) (*conn, error) {
		client.Close()
		return nil, opsapi.E(op, h.addr, opsapi.ErrUnavailable, err)
	}
	sc2, err := sftp.NewClient(client, sftp.UseConcurrentWrites(true))
	if err != nil {
		return fail(fmt.Errorf("sftp subsystem: %w", err))
	}
	home, err := sc2.Getwd()
	if err != nil {
		return fail(fmt.Errorf("sftp: home directory: %w", err))
	}
	c := &conn{client: client, sftp: sc2, home: home}
	id, err := identity(client)
	if err != nil {
		return fail(fmt.Errorf("learning the account's ids: %w", err))
	}
	c.id = id
	c.killer = h.startKillHelper(client)
	if c.agent, err = h.startAgent(client, sc2, home); err != nil {
		c.noAgent = "the agent could not be started: " + err.Error()
		h.log.Warn("no in-box agent on this host; commands run in a session each", "err", err)
	}
	h.log.Info("connected", "home", home, "uid", id.UID, "took", time.Since(begin))
	return c, nil
}

// identity asks the host for the account's uid and groups.
func identity(client *ssh.Client) (sftpops.Identity, error) {
	s, err := client.NewSession()
	if err != nil {
		return sftpops.Identity{}, err
	}
	defer s.Close()
	out, err := s.Output("id -u; id -g; id -G")
	if err != nil {
		return sftpops.Identity{}, err
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return sftpops.Identity{}, fmt.Errorf("unexpected output of id: %q", out)
	}
	var id sftpops.Identity
	if id.UID, err = strconv.Atoi(f[0]); err != nil {
		return id, err
	}
	for _, g := range f[1:] {
		n, err := strconv.Atoi(g)
		if err != nil {
			return id, err
		}
		id.GIDs = append(id.GIDs, n)
	}
	return id, nil
}

// watch marks c dead when its connection ends, and keeps it alive: a
// connection whose keepalives go unanswered for KeepaliveCountMax
// intervals is closed, which fails every call on it.
func (h *host) watch(c *conn) {
	cfg := h.b.cfg
	ended := make(chan struct{})
	go func() {
		err := c.client.Wait()
		c.dead.Store(true)
		close(ended)
		h.mu.Lock()
		closed := h.closed
		h.mu.Unlock()
		if !closed {
			h.log.Warn("connection lost; the next call reconnects", "err", err)
		}
	}()
	var lastReply atomic.Int64
	lastReply.Store(time.Now().UnixNano())
	go func() {
		for {
			if _, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil); err != nil {
				return
			}
			lastReply.Store(time.Now().UnixNano())
			select {
			case <-ended:
				return
			case <-time.After(cfg.KeepaliveInterval):
			}
		}
	}()
	tick := time.NewTicker(cfg.KeepaliveInterval)
	defer tick.Stop()
	limit := time.Duration(cfg.KeepaliveCountMax) * cfg.KeepaliveInterval
	for {
		select {
		case <-ended:
			return
		case <-tick.C:
			if time.Since(time.Unix(0, lastReply.Load())) > limit {
				h.log.Warn("keepalives unanswered; closing the connection", "after", limit)
				c.dead.Store(true)
				c.client.Close()
			}
		}
	}
}

// sftpClient is the sftpops.ClientFunc of every workspace on h.
func (h *host) sftpClient(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
	c, err := h.get(ctx)
	if err != nil {
		return nil, err
	}
	if c.sftp == broken {
		// The channel died before the connection was seen to: drop
		// the connection so that get dials anew.
		c.dead.Store(true)
		c.client.Close()
		if c, err = h.get(ctx); err != nil {
			return nil, err
		}
	}
	return c.sftp, nil
}

// session opens a session, waiting for a slot of sem.
func (h *host) session(ctx context.Context, sem chan struct{}) (*ssh.Session, func(), error) {
	var s *ssh.Session
	release, err := h.openSlot(ctx, sem, func(c *ssh.Client) (err error) {
		s, err = c.NewSession()
		return err
	})
	return s, release, err
}

// channel opens a bare session channel, waiting for a slot of sem; its
// requests (exit-status among them) are the caller's to read.
func (h *host) channel(ctx context.Context, sem chan struct{}) (ssh.Channel, <-chan *ssh.Request, func(), error) {
	var ch ssh.Channel
	var reqs <-chan *ssh.Request
	release, err := h.openSlot(ctx, sem, func(c *ssh.Client) (err error) {
		ch, reqs, err = c.OpenChannel("session", nil)
		return err
	})
	return ch, reqs, release, err
}

// openSlot takes a slot of sem and runs open on the live connection.
func (h *host) openSlot(ctx context.Context, sem chan struct{}, open func(*ssh.Client) error) (func(), error) {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	release := func() { once.Do(func() { <-sem }) }
	c, err := h.get(ctx)
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
		err := open(c.client)
		if err == nil {
			return release, nil
		}
		if !errors.As(err, &oce) && !redialed && ctx.Err() == nil {
			// The transport died before keepalives noticed (EOF):
			// drop it and dial once more, so the first call after a
			// lost connection does not fail.
			redialed = true
			c.dead.Store(true)
			c.client.Close()
			if c, err = h.get(ctx); err != nil {
				release()
				return nil, err
			}
			continue
		}
		if !errors.As(err, &oce) || attempt == 40 || ctx.Err() != nil || c.dead.Load() {
			release()
			return nil, opsapi.E("ssh.session", h.addr, opsapi.ErrUnavailable, err)
		}
		time.Sleep(time.Duration(5+5*min(attempt, 9)) * time.Millisecond)
	}
}

// start is remoteexec's StartFunc: one session per command, read at the
// channel level so that the exit status is seen when it arrives, before
// the output ends.
func (h *host) start(ctx context.Context, argv []string) (remoteexec.Process, error) {
	line := commandLine(argv)
	if p := h.takeSpare(); p != nil {
		err := p.exec(line)
		if err == nil {
			h.refillSpare()
			return p, nil
		}
		// The spare went stale (the connection was lost, or the server
		// closed it): open one as usual.
		p.Close()
	}
	ch, reqs, release, err := h.channel(ctx, h.execSlots)
	if err != nil {
		return nil, err
	}
	p := newChanProc(ch, reqs, release)
	if err := p.exec(line); err != nil {
		p.Close()
		return nil, opsapi.E("ssh.exec", h.addr, opsapi.ErrUnavailable, err)
	}
	h.refillSpare()
	return p, nil
}

// takeSpare returns the live connection's spare channel, or nil.
func (h *host) takeSpare() *chanProc {
	h.mu.Lock()
	c := h.cur
	h.mu.Unlock()
	if c == nil || c.dead.Load() {
		return nil
	}
	c.spareMu.Lock()
	p := c.spare
	c.spare = nil
	c.spareMu.Unlock()
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
func (h *host) refillSpare() {
	h.mu.Lock()
	c := h.cur
	h.mu.Unlock()
	if c == nil || c.dead.Load() {
		return
	}
	c.spareMu.Lock()
	if c.spare != nil || c.filling {
		c.spareMu.Unlock()
		return
	}
	c.filling = true
	c.spareMu.Unlock()
	go func() {
		var p *chanProc
		select {
		case h.execSlots <- struct{}{}:
			var once sync.Once
			release := func() { once.Do(func() { <-h.execSlots }) }
			if ch, reqs, err := c.client.OpenChannel("session", nil); err == nil {
				p = newChanProc(ch, reqs, release)
			} else {
				release()
			}
		default:
		}
		c.spareMu.Lock()
		c.filling = false
		if p != nil && !c.dead.Load() {
			c.spare, p = p, nil
		}
		c.spareMu.Unlock()
		if p != nil {
			p.Close()
		}
	}()
}

// run is remoteexec's RunFunc: a short command on its own session slot.
// A non-zero exit is an error. The builtin-only kill, which remoteexec
// runs after the kill script (a fork bomb at the account's process limit
// lets no new session start), goes to the connection's kill helper.
func (h *host) run(ctx context.Context, argv []string) ([]byte, error) {
	if mode, pg, marker, ok := remoteexec.NoForkKillArgs(argv); ok {
		if c, err := h.get(ctx); err == nil && c.killer != nil {
			out, err := c.killer.kill(ctx, mode, pg, marker)
			if err == nil {
				return out, nil
			}
			h.log.Warn("the kill helper failed; trying a new session", "err", err)
		}
	}
	ch, reqs, release, err := h.channel(ctx, h.ctlSlots)
	if err != nil {
		return nil, err
	}
	p := newChanProc(ch, reqs, release)
	defer p.Close()
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	if err := p.exec(commandLine(argv)); err != nil {
		return nil, opsapi.E("ssh.exec", h.addr, opsapi.ErrUnavailable, err)
	}
	go func() { _, _ = io.Copy(io.Discard, ch.Stderr()) }()
	out, rerr := io.ReadAll(io.LimitReader(ch, 1<<20))
	_, _ = io.Copy(io.Discard, ch)
	st, ok := <-p.exited
	switch {
	case !ok:
		return out, opsapi.E("ssh.exec", h.addr, opsapi.ErrUnavailable, errors.Join(errors.New("the session ended without an exit status"), rerr))
	case st.Code != 0:
		return out, fmt.Errorf("%s exited with %d", argv[0], st.Code)
	}
	return out, nil
}

// killHelper is remoteexec's KillHelperScript running in a session of its
// own for the life of a connection, holding one of the kill slots: a kill
// that needs no new process on the host.
type killHelper struct {
	mu  sync.Mutex
	ch  ssh.Channel
	out *bufio.Reader
}

// killHelperStart bounds the helper's start.
const killHelperStart = 10 * time.Second

// startKillHelper starts the helper on client, or returns nil (logged)
// when it cannot.
func (h *host) startKillHelper(client *ssh.Client) *killHelper {
	select {
	case h.ctlSlots <- struct{}{}:
	default:
		h.log.Warn("no session slot for the kill helper; a fork bomb at the account's process limit may outlive its deadline")
		return nil
	}
	ch, reqs, err := client.OpenChannel("session", nil)
	if err != nil {
		<-h.ctlSlots
		h.log.Warn("kill helper: opening its session", "err", err)
		return nil
	}
	go func() {
		for r := range reqs {
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
		<-h.ctlSlots
	}()
	go func() { _, _ = io.Copy(io.Discard, ch.Stderr()) }()
	kh := &killHelper{ch: ch, out: bufio.NewReader(ch)}
	ready := make(chan error, 1)
	go func() {
		ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{
			commandLine([]string{"bash", "-c", remoteexec.KillHelperScript})}))
		if err == nil && !ok {
			err = errors.New("the server refused to run it")
		}
		if err == nil {
			var line string
			line, err = kh.out.ReadString('\n')
			if err == nil && strings.TrimSpace(line) != "@wsbroker ready" {
				err = fmt.Errorf("unexpected first line %q", line)
			}
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(killHelperStart):
		err = errors.New("timed out")
	}
	if err != nil {
		ch.Close()
		h.log.Warn("kill helper did not start", "err", err)
		return nil
	}
	return kh
}

// kill asks the helper for one kill and returns its answer line.
func (k *killHelper) kill(ctx context.Context, mode, pgid, marker string) ([]byte, error) {
	if strings.ContainsAny(mode+pgid+marker, " \t\n") {
		return nil, errors.New("kill arguments with blanks")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { k.ch.Close() })
	defer stop()
	if _, err := fmt.Fprintf(k.ch, "%s %s %s\n", mode, pgid, marker); err != nil {
		return nil, err
	}
	for {
		line, err := k.out.ReadString('\n')
		if strings.HasPrefix(line, "@wsbroker killed ") {
			return []byte(line), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// chanProc is a command running in an SSH session channel. Its session
// slot is given back only once the server has confirmed the channel's
// close: a slot freed earlier could make the next session exceed the
// server's MaxSessions.
type chanProc struct {
	ch      ssh.Channel
	release func()
	exited  chan remoteexec.Status // the exit status, then closed
	done    chan struct{}          // closed when the channel is
	st      remoteexec.Status
	got     bool
}

func newChanProc(ch ssh.Channel, reqs <-chan *ssh.Request, release func()) *chanProc {
	p := &chanProc{ch: ch, release: release, exited: make(chan remoteexec.Status, 1), done: make(chan struct{})}
	go p.serve(reqs)
	return p
}

// exec asks the server to run line, and closes stdin.
func (p *chanProc) exec(line string) error {
	ok, err := p.ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{line}))
	if err == nil && !ok {
		err = errors.New("the server refused to run the command")
	}
	if err != nil {
		return err
	}
	// A command that has already ended may have closed the channel: EOF
	// then says nothing about the command.
	_ = p.ch.CloseWrite()
	return nil
}

// serve reads the channel's requests until it closes.
func (p *chanProc) serve(reqs <-chan *ssh.Request) {
	defer func() {
		close(p.exited)
		p.release()
		close(p.done)
	}()
	for req := range reqs {
		switch req.Type {
		case "exit-status":
			var m struct{ Status uint32 }
			if ssh.Unmarshal(req.Payload, &m) == nil && !p.got {
				p.report(remoteexec.Status{Code: int(m.Status)})
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if ssh.Unmarshal(req.Payload, &m) == nil && !p.got {
				p.report(remoteexec.Status{Code: 128 + signalNumber(m.Signal), Signal: "SIG" + m.Signal})
			}
		}
		if req.WantReply {
			_ = req.Reply(false, nil)
		}
	}
}

func (p *chanProc) report(st remoteexec.Status) {
	p.st, p.got = st, true
	p.exited <- st
}

func (p *chanProc) Stdout() io.Reader { return p.ch }
func (p *chanProc) Stderr() io.Reader { return p.ch.Stderr() }

// Exited is remoteexec.Exiter's.
func (p *chanProc) Exited() <-chan remoteexec.Status { return p.exited }

// Close closes the channel; the process itself is not touched.
func (p *chanProc) Close() error { return p.ch.Close() }

// Wait waits for the channel to close and returns the exit status the
// server reported, or an error when it reported none.
func (p *chanProc) Wait() (remoteexec.Status, error) {
	<-p.done
	if !p.got {
		return remoteexec.Status{Code: -1}, errors.New("the session ended without an exit status")
	}
	return p.st, nil
}

// commandLine is argv as the line the login shell runs. `sh -c SCRIPT
// NAME ARGS...` becomes `set -- ARGS...` and SCRIPT itself: the login
// shell (POSIX, as the package requires) runs the script without starting
// another sh, one program less per command.
func commandLine(argv []string) string {
	if len(argv) >= 4 && argv[0] == "sh" && argv[1] == "-c" {
		return "set -- " + remoteexec.ShellJoin(argv[4:]) + "\n" + argv[2]
	}
	return remoteexec.ShellJoin(argv)
}

// exitStatus reads Session.Wait's outcome.
func exitStatus(err error) (remoteexec.Status, error) {
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return remoteexec.Status{}, nil
	case errors.As(err, &ee):
		st := remoteexec.Status{Code: ee.ExitStatus()}
		if sig := ee.Signal(); sig != "" {
			st.Signal = "SIG" + sig
			if st.Code == 0 || st.Code == -1 {
				st.Code = 128 + signalNumber(sig)
			}
		}
		return st, nil
	}
	return remoteexec.Status{Code: -1}, err
}

// signalNumber maps an SSH signal name ("TERM") to Linux's number.
func signalNumber(name string) int {
	for n := 1; n < 32; n++ {
		if remoteexec.SignalName(n) == "SIG"+name {
			return n
		}
	}
	return 0
}

// close ends h's connection for good.
func (h *host) close() {
	h.mu.Lock()
	h.closed = true
	c := h.cur
	h.cur = nil
	h.mu.Unlock()
	if c != nil {
		if c.agent != nil {
			c.agent.Close()
		}
		c.sftp.Close()
		c.client.Close()
	}
}

// authMethods are the configured keys, then the agent's.
func (b *Backend) authMethods() ([]ssh.AuthMethod, error) {
	signers := append([]ssh.Signer(nil), b.signers...)
	var methods []ssh.AuthMethod
	if len(signers) > 0 {
		methods = append(methods, ssh.PublicKeys(signers...))
	}
	if b.cfg.Agent {
		sock := b.cfg.AgentSocket
		if sock == "" {
			sock = os.Getenv("SSH_AUTH_SOCK")
		}
		if sock == "" {
			if len(methods) == 0 {
				return nil, errors.New("agent: no agentSocket and no SSH_AUTH_SOCK")
			}
		} else {
			methods = append(methods, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
				ac, err := net.Dial("unix", sock)
				if err != nil {
					return nil, fmt.Errorf("ssh-agent: %w", err)
				}
				// The agent connection lives as long as the signers
				// may be used: the handshake.
				time.AfterFunc(time.Minute, func() { ac.Close() })
				return agent.NewClient(ac).Signers()
			}))
		}
	}
	return methods, nil
}

// knownAlgorithms lists the host key algorithms known_hosts holds for
// addr, so the server is asked for a key that can be verified (it may
// prefer another type it also has).
func knownAlgorithms(cb ssh.HostKeyCallback, addr string) []string {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil
	}
	probe, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil
	}
	hostPart, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	ip := net.ParseIP(hostPart)
	if ip == nil {
		ip = net.IPv4zero
	}
	var ke *knownhosts.KeyError
	if err := cb(addr, &net.TCPAddr{IP: ip, Port: p}, probe.PublicKey()); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		t := k.Key.Type()
		names := []string{t}
		if t == ssh.KeyAlgoRSA {
			names = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				algos = append(algos, n)
			}
		}
	}
	return algos
}
