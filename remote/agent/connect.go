package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// handshakeTimeout bounds dialling the broker and the TLS handshake.
const handshakeTimeout = 10 * time.Second

// ConnectAndServe dials the broker's Unix socket at path, authenticates
// both ways with creds (the agent is the TLS server on the connection it
// dialled) and serves that one connection until it ends; then it waits
// for every stream's handler, each of which kills the command it ran, as
// nobody waits for it anymore. ready is called once the handshake is
// done.
//
// The broker listens, not the agent: the socket's directory is the
// broker's, read-only in the workspace, so a workspace command (the
// agent's own user) can neither fill it nor make it unusable for the
// next agent. A command may connect to that socket too, but without the
// agent's key its handshake fails and the broker drops it.
func (s *Server) ConnectAndServe(path string, creds Creds, ready func()) error {
	tcfg, err := creds.ServerConfig()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("connecting to the broker: %w", err)
	}
	tc := tls.Server(c, tcfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return fmt.Errorf("the broker's TLS handshake: %w", err)
	}
	ready()
	err = s.ServeConn(tc)
	s.Wait()
	return err
}
