package local_test

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

// requireSandbox skips where the sandbox cannot run (not root, not Linux).
func requireSandbox(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox is Linux's")
	}
}

// ioUringSetup calls io_uring_setup(8, params) through Debian's python3
// (readable in the sandbox) and prints the descriptor or the error.
const ioUringSetup = `/usr/bin/python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(425, 8, ctypes.create_string_buffer(120))
print("fd", fd) if fd >= 0 else print("refused", os.strerror(ctypes.get_errno()))'`

// TestSandboxRefusesIOUring: io_uring is a second way into the kernel's
// calls, past the seccomp filter; the sandbox refuses to set one up
// (issue 37, finding 9).
func TestSandboxRefusesIOUring(t *testing.T) {
	requireSandbox(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testutil.SkipOrFail(t, "the io_uring probe needs /usr/bin/python3: "+err.Error())
	}
	ws := newWorkspace(t, local.Config{Sandbox: local.SandboxConfig{Mode: "on"}})
	out := sh(t, ws, ioUringSetup)
	if !strings.HasPrefix(out, "refused Operation not permitted") {
		t.Fatalf("io_uring_setup in the sandbox: %q, want refused with EPERM", out)
	}
}
