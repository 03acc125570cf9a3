//go:build !linux

package adversarial_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// tmpfsDir skips: a size-limited tmpfs mount is Linux's.
func tmpfsDir(t *testing.T, ws opsapi.Workspace) string {
	t.Skip("mounting a size-limited tmpfs needs Linux")
	return ""
}
