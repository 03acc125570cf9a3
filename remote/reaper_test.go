package remote_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
)

// TestReapExpiresIdleWorkspaces: an idle workspace is destroyed as
// "expired" and leaves the table; one in use is not; stop ends the
// reaper.
func TestReapExpiresIdleWorkspaces(t *testing.T) {
	var table remote.Table[*remote.Workspace]
	idle, idleBox := newWorkspace(t, remote.Config{})
	busy, busyBox := newWorkspace(t, remote.Config{})
	table.Adopt("idle", nil, func() *remote.Workspace { return idle })
	table.Adopt("busy", nil, func() *remote.Workspace { return busy })
	done := busy.Use()
	defer done()
	stop := remote.Reap(&table, 50*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for !idle.Destroyed() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if _, err := idle.Stat(t.Context(), "."); !errors.Is(err, opsapi.ErrNotExist) || !strings.Contains(err.Error(), "workspace expired") {
		t.Errorf("the idle workspace after the reaper: %v, want ErrNotExist saying it expired", err)
	}
	if idleBox.destroys.Load() != 1 || busyBox.destroys.Load() != 0 || busy.Destroyed() {
		t.Errorf("destroys: idle %d, busy %d; want 1 and 0", idleBox.destroys.Load(), busyBox.destroys.Load())
	}
}
