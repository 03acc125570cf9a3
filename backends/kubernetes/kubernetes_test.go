package kubernetes_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformance runs the shared suite, one fresh pod per case.
func TestConformance(t *testing.T) {
	b := newBackend(t)
	backendtest.Run(t, backendtest.Options{Confined: false, New: func(t *testing.T) opsapi.Workspace {
		return create(t, b, "", nil)
	}})
}
