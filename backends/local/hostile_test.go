package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
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

// TestCommandsInheritNoDescriptors: a descriptor the broker holds without
// close-on-exec (one it inherited from a supervisor, say) reaches no
// command, sandboxed or not: here one on a root-only file, whose number
// the command neither lists in /proc/self/fd nor reads from (issue 37,
// finding 4).
func TestCommandsInheritNoDescriptors(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root-only-bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opened, err := unix.Open(secret, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// dup2 onto a number no command opens by itself, without the flag:
	// as a supervisor leaves one.
	const fd = 77
	if err := unix.Dup2(opened, fd); err != nil {
		t.Fatal(err)
	}
	unix.Close(opened)
	t.Cleanup(func() { unix.Close(fd) })
	probe := fmt.Sprintf("ls /proc/self/fd; cat <&%d; echo end", fd)
	modes := []string{"off"}
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		modes = append(modes, "on")
	}
	for _, mode := range modes {
		t.Run("sandbox="+mode, func(t *testing.T) {
			ws := newWorkspace(t, local.Config{Sandbox: local.SandboxConfig{Mode: mode}})
			out, _ := run(t, ws, opsapi.ExecRequest{Command: probe})
			if !strings.Contains(out, "end") {
				t.Fatalf("the probe did not run: %q", out)
			}
			if strings.Contains(out, "root-only-bytes") || slices.Contains(strings.Fields(out), strconv.Itoa(fd)) {
				t.Fatalf("the command holds the broker's descriptor %d: %q", fd, out)
			}
		})
	}
}
