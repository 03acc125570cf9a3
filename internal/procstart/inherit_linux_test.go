package procstart_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/internal/procstart"
)

// TestChildrenInheritOnlyWhatTheyAreGiven: a descriptor the process holds
// without close-on-exec (as one inherited from a supervisor) does not
// reach a child started through the gate; the ExtraFiles its caller gives
// it still do.
func TestChildrenInheritOnlyWhatTheyAreGiven(t *testing.T) {
	const stray = 78
	if err := unix.Dup2(int(os.Stdin.Fd()), stray); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(stray) })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command("ls", "/proc/self/fd")
	cmd.ExtraFiles = []*os.File{w}
	out, err := outputOf(cmd)
	if err != nil {
		t.Fatal(err)
	}
	fds := strings.Fields(out)
	if len(fds) == 0 || strings.Contains(out, "\n78\n") || !strings.Contains(out, "\n3\n") {
		t.Fatalf("the child's descriptors: %q, want 3 (its ExtraFile) and not %d", fds, stray)
	}
}

func outputOf(cmd *exec.Cmd) (string, error) {
	var b strings.Builder
	cmd.Stdout = &b
	err := procstart.Run(cmd)
	return "\n" + b.String(), err
}
