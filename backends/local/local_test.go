package local_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

func TestConformance(t *testing.T) { conformance(t, local.Config{}) }

// TestConformanceFallback runs the suite with cgroups off: the containment
// a broker without cgroup permissions has (process groups and markers).
func TestConformanceFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("the full suite again, without cgroups")
	}
	conformance(t, local.Config{Cgroups: "off"})
}

// TestConformanceSandboxed runs the suite with every command in the
// sandbox (as root; the sandbox is off by default).
func TestConformanceSandboxed(t *testing.T) {
	testutil.RequireRoot(t)
	conformance(t, local.Config{Sandbox: local.SandboxConfig{Mode: "on"}})
}

// conformance gives each case its own backend (confinement cases watch the root's parent).
func conformance(t *testing.T, cfg local.Config) {
	backendtest.Run(t, backendtest.Options{Confined: true, New: func(t *testing.T) opsapi.Workspace {
		return backendtest.Create(t, newBackend(t, cfg), opsapi.WorkspaceSpec{ID: "conformance"})
	}})
}
