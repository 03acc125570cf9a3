package ssh_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestPingFollowsTheHost: a configured host answers before any workspace
// (a dial) and on its connection (a keepalive); once sshd is stopped Ping
// is ErrUnavailable, and it answers again after a restart.
func TestPingFollowsTheHost(t *testing.T) {
	srv := sshtest.Start(t)
	b := newBackend(t, srv)
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping before connecting: %v", err)
	}
	create(t, b, srv)
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping on the connection: %v", err)
	}
	srv.Kill()
	start := time.Now()
	if err := b.Ping(t.Context()); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("Ping with sshd stopped: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Ping took %s to notice", d)
	}
	srv.Restart()
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping after the restart: %v", err)
	}
}
