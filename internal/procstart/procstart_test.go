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

// TestStartThenHoldsTheSlotUntilEntered: the next start waits for the
// entered of the one before, which runs only for a command that started.
func TestStartThenHoldsTheSlotUntilEntered(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, procstart.Slots())
	var wg sync.WaitGroup
	for range procstart.Slots() {
		wg.Go(func() {
			cmd := exec.Command("true")
			if err := procstart.StartThen(cmd, func() { held <- struct{}{}; <-release }); err != nil {
				t.Error(err)
			}
			_ = cmd.Wait()
		})
	}
	for range procstart.Slots() {
		<-held
	}
	next := make(chan error, 1)
	go func() { next <- procstart.Run(exec.Command("true")) }()
	select {
	case err := <-next:
		t.Errorf("a start ran while every slot waited for its command's entry (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	if err := procstart.StartThen(exec.Command("/no/such/program"), func() { t.Error("entered ran for a start that failed") }); err == nil {
		t.Error("a missing program started")
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
