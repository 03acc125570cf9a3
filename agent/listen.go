package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// Limits of a listening agent: a workspace command can reach the socket
// (it runs as the same user), so unauthenticated connections are few and
// short-lived.
const (
	maxPending       = 16
	handshakeTimeout = 10 * time.Second
	// Linger is how long an agent whose last broker connection closed
	// waits for a new one before it exits; the broker starts a fresh agent
	// (with fresh keys) when it finds none.
	Linger = 30 * time.Second
)

// ListenAndServe serves TLS connections on a Unix socket at path until no
// authenticated connection has been open for Linger.
// ready is called once the socket accepts connections.
func (s *Server) ListenAndServe(path string, creds Creds, ready func()) error {
	tcfg, err := creds.ServerConfig()
	if err != nil {
		return err
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return err
	}
	ready()

	var (
		mu      sync.Mutex
		open    int
		idle    = time.AfterFunc(time.Hour, func() { ln.Close() })
		pending = make(chan struct{}, maxPending)
	)
	idle.Reset(Linger) // an agent nobody connects to does not stay
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		select {
		case pending <- struct{}{}:
		default:
			c.Close() // too many half-open connections
			continue
		}
		go func() {
			tc := tls.Server(c, tcfg)
			ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
			err := tc.HandshakeContext(ctx)
			cancel()
			<-pending
			if err != nil {
				s.log().Warn("refused a connection", "err", err)
				c.Close()
				return
			}
			mu.Lock()
			open++
			idle.Stop()
			mu.Unlock()
			if err := s.ServeConn(tc); err != nil {
				s.log().Warn("connection ended", "err", err)
			}
			mu.Lock()
			if open--; open == 0 {
				idle.Reset(Linger)
			}
			mu.Unlock()
		}()
	}
}
