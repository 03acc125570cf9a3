package client_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/client/overhttp"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceOverHTTP runs the one conformance suite against the local
// backend seen through the broker and this client: the wire must be
// transparent, errors, streaming and process killing included. Each case
// gets its own broker and backend, as the local backend's own run does:
// the confinement cases watch the directory beside the workspace root,
// which other cases' workspaces would otherwise share.
func TestConformanceOverHTTP(t *testing.T) {
	overhttp.Run(t, overhttp.Options{PerCase: true, Confined: true, Backend: func(t *testing.T) (opsapi.Backend, error) {
		return local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	}})
}
