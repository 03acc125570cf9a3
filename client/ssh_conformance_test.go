package client_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceSSHOverHTTP runs the conformance suite against the ssh
// backend (a real sshd on loopback) seen through the broker and this
// client. One broker serves every case: with the account as the boundary
// there is no confinement case to keep apart.
func TestConformanceSSHOverHTTP(t *testing.T) {
	srv := sshtest.Start(t)
	cfg := ssh.NewConfig()
	cfg.KnownHostsFiles = []string{srv.KnownHosts}
	cfg.IdentityFiles = []string{srv.IdentityFile}
	cfg.Hosts = map[string]ssh.Host{"test": {Address: srv.Addr, User: srv.User}}
	sb, err := ssh.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{Tokens: []string{testToken}, DefaultBackend: sb.Name()},
		map[string]opsapi.Backend{sb.Name(): sb}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
		ts.Close()
		_ = sb.Close()
	})
	c := client.New(ts.URL, testToken, client.WithHTTPClient(ts.Client()))

	backendtest.Run(t, backendtest.Options{
		New: func(t *testing.T) opsapi.Workspace {
			opts, _ := json.Marshal(map[string]string{"host": "test", "root": srv.WorkDir(t) + "/ws"})
			info, err := c.CreateWorkspace(context.Background(), "ssh", opts)
			if err != nil {
				t.Fatalf("creating an ssh workspace over HTTP: %v", err)
			}
			ws := c.WorkspaceFor(info)
			t.Cleanup(func() {
				if err := ws.Destroy(context.Background()); err != nil {
					t.Errorf("deleting workspace %s: %v", info.ID, err)
				}
			})
			return ws
		},
		Confined: false,
	})
}
