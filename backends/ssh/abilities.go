package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// pingTimeout bounds how long one host may take to answer a readiness
// check: a host that does not answer in that time is not ready.
const pingTimeout = 5 * time.Second

// Ping reports whether every configured host, and every host the backend
// is connected to, answers: a connected host must answer a keepalive
// request on its connection; one without a connection must accept a TCP
// dial. The first host that does not is ErrUnavailable.
func (b *Backend) Ping(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return opsapi.E("ssh.Ping", "", opsapi.ErrUnavailable, errors.New("backend closed"))
	}
	targets := map[string]*host{}
	for _, h := range b.hosts {
		targets[h.addr] = h
	}
	b.mu.Unlock()
	for _, h := range b.cfg.Hosts {
		if addr, err := normalizeAddr(h.Address); err == nil {
			if _, ok := targets[addr]; !ok {
				targets[addr] = nil
			}
		}
	}
	addrs := make([]string, 0, len(targets))
	for a := range targets {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		if err := pingHost(ctx, addr, targets[addr]); err != nil {
			return opsapi.E("ssh.Ping", addr, opsapi.ErrUnavailable, err)
		}
	}
	return nil
}

// pingHost asks h's live connection, or dials addr when there is none.
func pingHost(ctx context.Context, addr string, h *host) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if h != nil {
		h.mu.Lock()
		c := h.cur
		h.mu.Unlock()
		if c != nil && !c.dead.Load() {
			return keepalive(ctx, c)
		}
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("host does not answer: %w", err)
	}
	return nc.Close()
}

// keepalive sends OpenSSH's keepalive request and waits for its answer
// (any answer, even a refusal, shows the server is there).
func keepalive(ctx context.Context, c *conn) error {
	done := make(chan error, 1)
	go func() {
		_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("host does not answer on its connection: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("host does not answer on its connection: %w", ctx.Err())
	}
}

var _ opsapi.Pinger = (*Backend)(nil)
