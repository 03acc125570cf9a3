package client_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceDockerOverHTTP runs the conformance suite against the
// docker backend (the local engine, one container per case) seen through
// the broker and this client. One broker serves every case: with the
// container as the boundary there is no confinement case to keep apart.
// The backend runs with serve's defaults, so file operations use the
// workspace image's own sftp-server (package docker's tests cover the
// injected one).
func TestConformanceDockerOverHTTP(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	cfg := docker.NewConfig()
	cfg.KillGrace = 500 * time.Millisecond
	db, err := docker.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{Tokens: []string{testToken}, DefaultBackend: db.Name()},
		map[string]opsapi.Backend{db.Name(): db}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
		ts.Close()
		_ = db.Close()
	})
	c := client.New(ts.URL, testToken, client.WithHTTPClient(ts.Client()))

	backendtest.Run(t, backendtest.Options{
		New: func(t *testing.T) opsapi.Workspace {
			info, err := c.CreateWorkspace(context.Background(), "docker", nil)
			if err != nil {
				t.Fatalf("creating a docker workspace over HTTP: %v", err)
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
