package backendtest

import (
	"context"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Create creates a workspace on b with spec for the test t and destroys it
// when t ends; any failure fails t. It is what an Options.New usually
// does:
//
//	New: func(t *testing.T) opsapi.Workspace {
//		return backendtest.Create(t, b, opsapi.WorkspaceSpec{ID: "c"})
//	}
func Create(t *testing.T, b opsapi.Backend, spec opsapi.WorkspaceSpec) opsapi.Workspace {
	t.Helper()
	ws, err := b.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("creating a %s workspace: %v", b.Name(), err)
	}
	t.Cleanup(func() {
		d, ok := ws.(opsapi.Destroyer)
		if !ok {
			return
		}
		// t.Context is canceled before cleanups run.
		if err := d.Destroy(context.Background()); err != nil {
			t.Errorf("destroying workspace %s: %v", spec.ID, err)
		}
	})
	return ws
}
