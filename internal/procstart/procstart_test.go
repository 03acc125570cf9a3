package procstart_test

import (
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/procstart"
)

func TestDoBoundsStartsInProgress(t *testing.T) {
	var now, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 * procstart.Slots() {
		wg.Go(func() {
			_ = procstart.Do(func() error {
				n := now.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				now.Add(-1)
				return nil
			})
		})
	}
	wg.Wait()
	if got := most.Load(); got > int32(procstart.Slots()) || got < 1 {
		t.Fatalf("%d starts ran at once, want 1 to %d", got, procstart.Slots())
	}
}

func TestRunReportsTheCommandsFailure(t *testing.T) {
	if err := procstart.Run(exec.Command("false")); err == nil {
		t.Fatal("false succeeded")
	}
	if err := procstart.Run(exec.Command("true")); err != nil {
		t.Fatal(err)
	}
	if err := procstart.Start(exec.Command("/no/such/program")); err == nil {
		t.Fatal("a missing program started")
	}
}
