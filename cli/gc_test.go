package cli

import (
	"log/slog"
	"runtime/debug"
	"testing"
)

// restoreGC puts back the test binary's own settings after a test
// changed them.
func restoreGC(t *testing.T) {
	pct := debug.SetGCPercent(100)
	debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	})
}

func TestGCDefaultsApplyWhenTheEnvironmentSetsNone(t *testing.T) {
	restoreGC(t)
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(1 << 40)
	c := &CLI{Getenv: envMap(nil)}
	c.tuneGC(slog.New(slog.DiscardHandler))
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GOGC = %d, want %d", got, defaultGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("memory limit = %d, want %d", got, defaultMemoryLimit)
	}
}

func TestGCSettingsFromTheEnvironmentWin(t *testing.T) {
	restoreGC(t)
	// The runtime read GOGC and GOMEMLIMIT at start; tuneGC must leave
	// what is in force alone when either is set.
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	c := &CLI{Getenv: envMap(map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"})}
	c.tuneGC(slog.New(slog.DiscardHandler))
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC = %d, want the environment's 150", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit = %d, want the environment's %d", got, 1<<30)
	}
}
