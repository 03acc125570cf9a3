package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the lock a serving broker holds in its state directory.
const lockFileName = "broker.lock"

// lockState takes the state directory for this process alone, for as long
// as it lives (the kernel drops the lock when it exits, however it exits).
// Two brokers on one state directory would each take the other's
// workspaces for leftovers of a crash: the local backend removes every
// interrupted write's temporary file at start, and each would kill what
// the other's commands left running.
func lockState(dir string) (release func(), err error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid, _ := os.ReadFile(path)
			return nil, fmt.Errorf("state directory %s is in use by another broker (pid %s); give each broker its own",
				dir, strings.TrimSpace(string(pid)))
		}
		return nil, fmt.Errorf("state directory lock %s: %w", path, err)
	}
	// The pid is for the message above only; the lock is what counts.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
