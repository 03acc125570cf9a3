package client_test

import (
	"encoding/json"
	"testing"

	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/client/overhttp"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceSSHOverHTTP runs the conformance suite against the ssh
// backend (a real sshd on loopback) seen through the broker and this
// client. One broker serves every case: the account is the boundary.
// Commands go through the in-box agent, as serve's do with the agent
// binary beside the broker.
func TestConformanceSSHOverHTTP(t *testing.T) {
	srv := sshtest.Start(t)
	cfg := ssh.NewConfig()
	cfg.KnownHostsFiles, cfg.IdentityFiles = []string{srv.KnownHosts}, []string{srv.IdentityFile}
	cfg.Hosts = map[string]ssh.Host{"test": {Address: srv.Addr, User: srv.User}}
	cfg.AgentBinary = testutil.AgentBinary(t)
	overhttp.Run(t, overhttp.Options{
		Backend: func(t *testing.T) (opsapi.Backend, error) { return ssh.New(cfg, testutil.Logger(t)) },
		CreateOptions: func(t *testing.T) json.RawMessage {
			opts, _ := json.Marshal(map[string]string{"host": "test", "root": srv.WorkDir(t) + "/ws"})
			return opts
		},
	})
}
