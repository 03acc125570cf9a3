package client_test

import (
	"context"
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceOverHTTP runs the one conformance suite against the local
// backend seen through the broker and this client: the wire must be
// transparent, errors, streaming and process killing included. Each case
// gets its own broker and backend, as the local backend's own run does:
// the confinement cases watch the directory beside the workspace root,
// which other cases' workspaces would otherwise share.
func TestConformanceOverHTTP(t *testing.T) {
	backendtest.Run(t, backendtest.Options{
		New: func(t *testing.T) opsapi.Workspace {
			c, _ := startBroker(t, broker.Config{})
			info, err := c.CreateWorkspace(context.Background(), "local", nil)
			if err != nil {
				t.Fatalf("creating a workspace over HTTP: %v", err)
			}
			ws := c.WorkspaceFor(info)
			t.Cleanup(func() {
				if err := ws.Destroy(context.Background()); err != nil {
					t.Errorf("deleting workspace %s: %v", info.ID, err)
				}
			})
			return ws
		},
		Confined: true,
	})
}
