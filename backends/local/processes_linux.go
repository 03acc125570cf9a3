//go:build linux

package local

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/opsapi"
)

// killPids ends pids, each of which must be in mine (the workspace's
// processes): SIGTERM, up to grace, SIGKILL. A pid that is not the
// workspace's is ErrNotExist and nothing is killed.
func killPids(op string, pids, mine []int, grace time.Duration) (int, error) {
	// Pin every target by pidfd while it is known to be ours, so a pid
	// reused later is never hit.
	fds := make([]int, 0, len(pids))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, p := range pids {
		if !slices.Contains(mine, p) {
			return 0, opsapi.E(op, fmt.Sprint(p), opsapi.ErrNotExist, errors.New("no such process in the workspace"))
		}
		fd, err := unix.PidfdOpen(p, 0)
		if err != nil {
			if errors.Is(err, syscall.ESRCH) {
				continue
			}
			return 0, opsapi.E(op, fmt.Sprint(p), nil, err)
		}
		fds = append(fds, fd)
	}
	for _, fd := range fds {
		_ = unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
	}
	for end := time.Now().Add(grace); time.Now().Before(end) && !allExited(fds); {
		time.Sleep(10 * time.Millisecond)
	}
	for _, fd := range fds {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
	return len(fds), nil
}

func allExited(fds []int) bool {
	for _, fd := range fds {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, 0); err != nil || n == 0 {
			return false
		}
	}
	return true
}

// shellWatch tells whether a command's shell still runs, through a pidfd
// taken before the shell could be reaped; while it runs, neither its pid
// nor its group's id can be another process's.
type shellWatch struct{ fd int }

// watchShell watches pid, which must be an unreaped child. Without
// pidfds (before Linux 5.3) the shell never counts as running.
func watchShell(pid int) shellWatch {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return shellWatch{fd: -1}
	}
	return shellWatch{fd: fd}
}

func (s shellWatch) running() bool { return s.fd >= 0 && !allExited([]int{s.fd}) }

func (s shellWatch) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
}
