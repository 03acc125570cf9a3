//go:build linux

package agent

import (
	"errors"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// reservedThreads is how many OS threads the reaper makes before the
// command starts; agentThreads how many the agent keeps.
const (
	reservedThreads = 8
	agentThreads    = 32
)

// reserveThreads makes n OS threads now and leaves them idle in the Go
// runtime's pool. The kill runs when a fork bomb may have filled the
// sandbox's process limit, where the runtime could not create the thread
// a blocking system call needs and would abort, taking the reaper or the
// agent (and the kill) with it; idle threads are reused instead.
func reserveThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for i := 0; i < n; i++ {
		go func() {
			runtime.LockOSThread() // each goroutine holds a thread of its own
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread() // the thread goes back to the pool
		}()
	}
	locked.Wait()
	release.Done()
}

// reapChildren collects the agent's ended children (the reapers) in one
// goroutine woken by SIGCHLD, instead of one blocked wait per command,
// which would hold an OS thread each: at a full process limit the runtime
// could not make the next one. Reapers report their command's status on
// their status pipe; their own exit status says nothing more.
func reapChildren() {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	tick := time.NewTicker(time.Second) // in case a SIGCHLD was merged away
	for {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid == 0 {
				break
			}
		}
		select {
		case <-chld:
		case <-tick.C:
		}
	}
}
