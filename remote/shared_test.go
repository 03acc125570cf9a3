package remote_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/remote"
)

// TestSharedAgentOutlivesDestroy: destroying a workspace closes its own
// agent connection, but only lets go of one its Transport shares with
// other workspaces (ssh: one per host connection).
func TestSharedAgentOutlivesDestroy(t *testing.T) {
	for _, shared := range []bool{false, true} {
		w, _ := newWorkspace(t, remote.Config{SharedAgent: shared})
		c, err := w.Agent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
		if c.IsClosed() == shared {
			t.Errorf("SharedAgent %v: the agent connection closed: %v", shared, c.IsClosed())
		}
		if w.AgentLive() {
			t.Errorf("SharedAgent %v: the destroyed workspace still holds its agent", shared)
		}
	}
}
