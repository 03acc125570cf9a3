package testutil

import (
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/loopfs"
)

// InCI reports whether skips are disallowed: CI=true, or
// BROKER_TEST_DISALLOW_SKIP set to anything but "" or "0".
func InCI() bool {
	if os.Getenv("CI") == "true" {
		return true
	}
	v := os.Getenv("BROKER_TEST_DISALLOW_SKIP")
	return v != "" && v != "0"
}

// SkipOrFail skips the test with reason, or fails it when InCI.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required under CI, cannot skip: %s", reason)
	}
	t.Skip(reason)
}

// RequireCommand returns the path of the first of names found on PATH, or
// skips (fails under CI) when none is.
func RequireCommand(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	SkipOrFail(t, "needs one of "+strings.Join(names, ", ")+" on PATH")
	return ""
}

// RequireRoot skips (fails under CI) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root")
	}
}

// Logger returns a debug-level logger that writes to t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// RequireLoopDevices skips (fails under CI) unless workspaces can have
// filesystems of their own here (package loopfs: root, loop devices,
// mkfs.ext4, mount).
func RequireLoopDevices(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	if err := loopfs.Probe(t.TempDir()); err != nil {
		SkipOrFail(t, "loop filesystems: "+err.Error())
	}
}
