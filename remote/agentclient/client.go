package agentclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/hashicorp/yamux"
	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/remote/agent"
)

// Client is one connection to an agent.
type Client struct {
	conn io.ReadWriteCloser
	sess *yamux.Session
	// Version is the protocol version both sides speak.
	Version int

	mu   sync.Mutex
	sftp *sftp.Client
}

// maxHandshakes bounds the handshakes Accept runs at once: a workspace
// command may connect to the socket too, and each of its connections
// costs a goroutine until the handshake's deadline.
const maxHandshakes = 8

// Accept waits on ln for the agent's connection: the first whose TLS
// handshake proves the agent's key (creds.Peer; the agent is the TLS
// server on the connection it dialled). Others, which a workspace
// command can open since the socket is in its reach, are closed. Accept
// closes ln before it returns, so nothing can connect afterwards.
func Accept(ctx context.Context, ln net.Listener, creds agent.Creds) (*Client, error) {
	cfg, err := creds.ClientConfig()
	if err != nil {
		ln.Close()
		return nil, err
	}
	hctx, cancel := context.WithCancel(ctx) // ends every handshake once one won
	defer cancel()
	stop := context.AfterFunc(hctx, func() { ln.Close() })
	defer stop()
	won := make(chan *tls.Conn, 1)
	slots := make(chan struct{}, maxHandshakes)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case slots <- struct{}{}:
			default:
				c.Close() // too many at once: not the agent's
				continue
			}
			go func() {
				defer func() { <-slots }()
				tc := tls.Client(c, cfg)
				if err := tc.HandshakeContext(hctx); err != nil {
					c.Close()
					return
				}
				select {
				case won <- tc:
					cancel()
				default:
					c.Close()
				}
			}()
		}
	}()
	<-hctx.Done() // a handshake won, or ctx ended
	ln.Close()
	select {
	case tc := <-won:
		return New(ctx, tc)
	default:
		return nil, fmt.Errorf("waiting for the agent to connect: %w", context.Cause(ctx))
	}
}

// New speaks the protocol on an established connection (an SSH
// session's stdio, or an authenticated TLS connection).
func New(ctx context.Context, conn io.ReadWriteCloser) (*Client, error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	v, err := agent.Hello(conn)
	if !stop() {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	sess, err := yamux.Client(conn, agent.MuxConfig())
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Client{conn: conn, sess: sess, Version: v}, nil
}

// Closed is closed when the connection has ended.
func (c *Client) Closed() <-chan struct{} { return c.sess.CloseChan() }

// IsClosed reports whether the connection has ended.
func (c *Client) IsClosed() bool { return c.sess.IsClosed() }

// Close ends the connection; the agent kills the commands still running
// on it.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.sftp != nil {
		c.sftp.Close()
	}
	c.mu.Unlock()
	return c.sess.Close()
}

// open opens a stream for req. A ctx already done sends nothing: closing
// the stream when it ends races with the request's write, and a command
// asked for with a canceled ctx must not run.
func (c *Client) open(ctx context.Context, req agent.Request) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	st, err := c.sess.OpenStream()
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	if err := agent.WriteRequest(st, req); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// SFTP is the connection's SFTP session, opened at the first call and
// shared. broken, when it is the current session, is replaced.
func (c *Client) SFTP(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sftp != nil && c.sftp != broken {
		return c.sftp, nil
	}
	if c.sftp != nil {
		c.sftp.Close()
		c.sftp = nil
	}
	st, err := c.open(ctx, agent.Request{Op: agent.OpSFTP})
	if err != nil {
		return nil, err
	}
	sc, err := sftp.NewClientPipe(st, st,
		sftp.UseConcurrentReads(true), sftp.UseConcurrentWrites(true),
		sftp.MaxConcurrentRequestsPerFile(64))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("sftp over the agent: %w", err)
	}
	c.sftp = sc
	return sc, nil
}

// Identity asks the agent which account it serves as.
func (c *Client) Identity(ctx context.Context) (agent.Identity, error) {
	st, err := c.open(ctx, agent.Request{Op: agent.OpIdentity})
	if err != nil {
		return agent.Identity{}, err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	var id agent.Identity
	if err := json.NewDecoder(io.LimitReader(st, 64<<10)).Decode(&id); err != nil {
		return agent.Identity{}, fmt.Errorf("agent identity: %w", err)
	}
	return id, nil
}
