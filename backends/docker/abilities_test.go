package docker_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestPingFollowsTheEngine: a backend whose engine socket stops answering
// is not ready (ErrUnavailable). The engine is reached through a proxy
// socket that the test closes.
func TestPingFollowsTheEngine(t *testing.T) {
	testutil.RequireDocker(t)
	upstream := strings.TrimPrefix(docker.DefaultHost, "unix://")
	proxy := startSocketProxy(t, upstream)
	b := newBackend(t, func(c *docker.Config) { c.Host = "unix://" + proxy.path })
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping with the engine answering: %v", err)
	}
	proxy.stop()
	if err := b.Ping(t.Context()); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("Ping with nobody on the socket: %v, want ErrUnavailable", err)
	}
}

// TestNetworkOptions: the network a create names, and pinning one into
// options that keep their other fields.
func TestNetworkOptions(t *testing.T) {
	var b docker.Backend // neither needs the engine
	if got := b.Network(json.RawMessage(`{"image":"x","network":"bridge"}`)); got != "bridge" {
		t.Errorf("Network = %q", got)
	}
	if got := b.Network(nil); got != "" {
		t.Errorf("Network(nil) = %q", got)
	}
	out, err := b.WithNetwork(json.RawMessage(`{"image":"x"}`), "none")
	if err != nil || string(out) != `{"image":"x","network":"none"}` {
		t.Errorf("WithNetwork = %s, %v", out, err)
	}
	if _, err := b.WithNetwork(json.RawMessage(`[1]`), "none"); !errors.Is(err, opsapi.ErrInvalid) {
		t.Errorf("WithNetwork on an array: %v", err)
	}
}

// socketProxy forwards a unix socket to another until stopped; then
// nobody answers on it.
type socketProxy struct {
	path  string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startSocketProxy(t *testing.T, upstream string) *socketProxy {
	t.Helper()
	p := &socketProxy{path: filepath.Join(t.TempDir(), "engine.sock")}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // the socket file stays, unanswered
	p.ln = ln
	go p.serve(upstream)
	t.Cleanup(p.stop)
	return p
}

func (p *socketProxy) serve(upstream string) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("unix", upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); u.Close() }()
		go func() { _, _ = io.Copy(c, u); c.Close() }()
	}
}

func (p *socketProxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
