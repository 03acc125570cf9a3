//go:build linux

package adversarial_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// tmpfsDir mounts a 16 MiB tmpfs at <root>/full (needs root) and returns
// "full"; it is unmounted before the workspace is destroyed.
func tmpfsDir(t *testing.T, ws opsapi.Workspace) string {
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root; without it, give the state dir its own file system (docs/security.md)")
	}
	dir := filepath.Join(ws.Root(), "full")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		testutil.SkipOrFail(t, "mount tmpfs: "+err.Error())
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return "full"
}
