package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
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
	"github.com/wsbroker/wsbroker/remote/sshexec"
)

// agentStartTimeout bounds uploading and starting an agent.
const agentStartTimeout = 30 * time.Second

// host is one user@address: one SSH connection (with its SFTP channel)
// shared by every workspace there, reconnected when it dies.
type host struct {
	b    *Backend
	addr string // host:port
	user string
	log  *slog.Logger
	*sshexec.Sessions
	runner *remoteexec.Runner

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
	agent   *agentclient.Client // the in-box agent; nil when it could not start
	noAgent string              // why agent is nil
}

func newHost(b *Backend, addr, user string) *host {
	h := &host{b: b, addr: addr, user: user, log: b.logger.With("host", addr, "user", user)}
	h.Sessions = sshexec.New(h.sshClient, b.cfg.MaxSessions, addr, h.log)
	h.runner = remoteexec.New(h.Start, h.Run, remoteexec.Config{
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
	h.Attach(client)
	if a := h.b.agent; a != nil {
		ctx, cancel := context.WithTimeout(context.Background(), agentStartTimeout)
		defer cancel()
		if c.agent, err = sshexec.StartAgent(ctx, client, sc2, *a, home, h.log); err != nil {
			c.noAgent = "the agent could not be started: " + err.Error()
			h.log.Warn("no in-box agent on this host; commands run in a session each", "err", err)
		}
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

// sshClient is the sshexec.ClientFunc of h's sessions.
func (h *host) sshClient(ctx context.Context, broken *ssh.Client) (*ssh.Client, error) {
	c, err := h.live(ctx, func(c *conn) bool { return c.client == broken })
	if err != nil {
		return nil, err
	}
	return c.client, nil
}

// SFTP is the sftpops.ClientFunc of every workspace on h (remote.Fallback's).
func (h *host) SFTP(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
	c, err := h.live(ctx, func(c *conn) bool { return c.sftp == broken })
	if err != nil {
		return nil, err
	}
	return c.sftp, nil
}

// live is the live connection. When it is broken (its channel died
// before the connection was seen to), it is dropped and one dialed anew.
func (h *host) live(ctx context.Context, broken func(*conn) bool) (*conn, error) {
	c, err := h.get(ctx)
	if err != nil || !broken(c) {
		return c, err
	}
	c.dead.Store(true)
	c.client.Close()
	return h.get(ctx)
}

// Identity is the account's uid and groups (remote.Fallback's).
func (h *host) Identity(ctx context.Context) (sftpops.Identity, error) {
	c, err := h.get(ctx)
	if err != nil {
		return sftpops.Identity{}, err
	}
	return c.id, nil
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
