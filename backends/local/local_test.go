package local_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformance runs the suite with the defaults: sandboxed as root
// (sandbox.mode auto), unsandboxed otherwise.
func TestConformance(t *testing.T) { conformance(t, local.Config{}) }

// TestConformanceFallback runs the suite with cgroups off: the containment
// a broker without cgroup permissions has (process groups and markers).
func TestConformanceFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("the full suite again, without cgroups")
	}
	conformance(t, local.Config{Cgroups: "off"})
}

// TestConformanceUnsandboxed runs the suite with the sandbox off (what a
// broker that is not root gets), as root.
func TestConformanceUnsandboxed(t *testing.T) {
	if testing.Short() {
		t.Skip("the full suite again, unsandboxed")
	}
	testutil.RequireRoot(t)
	conformance(t, local.Config{Sandbox: local.SandboxConfig{Mode: "off"}})
}

// conformance gives each case its own backend (confinement cases watch the root's parent).
func conformance(t *testing.T, cfg local.Config) {
	backendtest.Run(t, backendtest.Options{Confined: true, New: func(t *testing.T) opsapi.Workspace {
		return backendtest.Create(t, newBackend(t, cfg), opsapi.WorkspaceSpec{ID: "conformance"})
	}})
}
