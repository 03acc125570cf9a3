package ssh_test

import (
	"encoding/json"
	"testing"

	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

// newBackend returns a backend that knows srv as host "test" and closes
// with the test.
func newBackend(t testing.TB, srv *sshtest.Server, opts ...func(*ssh.Config)) *ssh.Backend {
	t.Helper()
	cfg := ssh.NewConfig()
	cfg.KnownHostsFiles = []string{srv.KnownHosts}
	cfg.IdentityFiles = []string{srv.IdentityFile}
	cfg.Hosts = map[string]ssh.Host{"test": {Address: srv.Addr, User: srv.User}}
	cfg.AgentBinary = testutil.AgentBinary(t)
	for _, o := range opts {
		o(&cfg)
	}
	b, err := ssh.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// rootOpts are Create options for host "test" with the given root.
func rootOpts(srv *sshtest.Server, root string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"host": "test", "root": root})
	return b
}
