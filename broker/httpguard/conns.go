package httpguard

import (
	"net"
	"sync"
)

// ConnLimiter is a listener that holds at most total connections open at
// once, and at most perPeer from one IP address. Past total, Accept
// waits for a connection to close (new ones wait in the kernel's listen
// backlog); past perPeer, the new connection is closed at once. 10,500
// slow uploads from one client took 19,923 of 20,000 descriptors before
// this.
type ConnLimiter struct {
	net.Listener
	slots   chan struct{}
	perPeer int

	mu    sync.Mutex
	peers map[string]int
}

// LimitConns caps ln at total connections open at once, perPeer from
// one IP address.
func LimitConns(ln net.Listener, total, perPeer int) *ConnLimiter {
	return &ConnLimiter{Listener: ln, slots: make(chan struct{}, total), perPeer: perPeer, peers: map[string]int{}}
}

// Accept returns the next connection within the caps. Errors are the
// inner listener's; http.Server backs off on temporary ones (EMFILE), so
// a full descriptor table does not make the accept loop spin.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	for {
		l.slots <- struct{}{}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		peer := addrIP(c.RemoteAddr())
		l.mu.Lock()
		over := l.peers[peer] >= l.perPeer
		if !over {
			l.peers[peer]++
		}
		l.mu.Unlock()
		if over {
			_ = c.Close()
			<-l.slots
			continue
		}
		return &limitedConn{Conn: c, l: l, peer: peer}, nil
	}
}

func (l *ConnLimiter) release(peer string) {
	l.mu.Lock()
	if l.peers[peer]--; l.peers[peer] <= 0 {
		delete(l.peers, peer)
	}
	l.mu.Unlock()
	<-l.slots
}

// Open reports the connections held now.
func (l *ConnLimiter) Open() int { return len(l.slots) }

func addrIP(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitedConn gives its slot back once, on its first Close.
type limitedConn struct {
	net.Conn
	l    *ConnLimiter
	peer string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.peer) })
	return err
}
