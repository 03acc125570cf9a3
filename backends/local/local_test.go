package local_test

import (
	"context"
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Options{Confined: true, New: func(t *testing.T) opsapi.Workspace {
		b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
		var ws opsapi.Workspace
		if err == nil {
			ws, err = b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "conformance"})
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // t.Context is canceled before cleanups run
			if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
				t.Error(err)
			}
		})
		return ws
	}})
}

// TestConformanceFallback runs the suite with cgroups off: the containment
// a broker without cgroup permissions has (process groups and markers).
func TestConformanceFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("the full suite again, without cgroups")
	}
	backendtest.Run(t, backendtest.Options{Confined: true, New: func(t *testing.T) opsapi.Workspace {
		b, err := local.New(local.Config{StateDir: t.TempDir(), Cgroups: "off"}, testutil.Logger(t))
		var ws opsapi.Workspace
		if err == nil {
			ws, err = b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "conformance"})
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
				t.Error(err)
			}
		})
		return ws
	}})
}
