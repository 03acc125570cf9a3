package local

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// threads is this process's OS thread count.
func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}

// Waiting for 64 running commands holds no OS thread each (os/exec's
// Wait alone blocks one in waitid per command), and each wait still
// returns once its command exits, with its exit status.
func TestExitWaitHoldsNoThread(t *testing.T) {
	if !pidfdWaits() {
		t.Skip("the kernel lacks pidfd waitid (Linux 5.4)")
	}
	const n = 64
	before := threads(t)
	stdins := make([]io.WriteCloser, n)
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		cmd := exec.Command("sh", "-c", "cat >/dev/null; exit 3")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdins[i] = in
		ew := prepareExitWait(cmd)
		if err := cmd.Start(); err != nil {
			ew.close()
			t.Fatal(err)
		}
		wg.Go(func() {
			ew.wait()
			_ = cmd.Wait()
			codes[i] = cmd.ProcessState.ExitCode()
		})
	}
	peak := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		peak = max(peak, threads(t))
	}
	for _, in := range stdins {
		in.Close()
	}
	wg.Wait()
	if peak-before >= n/2 {
		t.Errorf("%d threads while waiting for %d commands, %d before", peak, n, before)
	}
	for i, c := range codes {
		if c != 3 {
			t.Fatalf("command %d: exit code %d, want 3", i, c)
		}
	}
}
