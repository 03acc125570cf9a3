package local

import (
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// exitWaiter lets a command's exit be waited for on the network poller.
// os/exec's Wait blocks an OS thread in waitid for the command's whole
// life: 200 running commands held 200 threads, so each further blocking
// call needed a new thread, and creating one stalls for as long as the
// kernel's fork lock is busy (cgroup v1 attaches of commands starting),
// which stopped the whole broker, /healthz included, for seconds. With a
// pidfd the wait parks a goroutine instead; Wait is then called only
// once the command has exited and returns at once.
type exitWaiter struct{ fd int }

// pidfdWaits says whether the kernel has pidfds and waitid(P_PIDFD)
// (Linux 5.4); without them os/exec's own wait is used.
var pidfdWaits = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var info unix.Siginfo
	// Not our child: ECHILD where P_PIDFD is known, EINVAL where not.
	err = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
	return err == unix.ECHILD //nolint:errorlint // a bare errno from the syscall
})

// prepareExitWait asks cmd's start for a pidfd of its own (os/exec
// duplicates it for itself); call it last before cmd.Start.
func prepareExitWait(cmd *exec.Cmd) *exitWaiter {
	w := &exitWaiter{fd: -1}
	if !pidfdWaits() {
		return w
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.PidFD = &w.fd
	return w
}

// wait returns once the process has exited (not reaped: cmd.Wait does
// that), parked on the poller; without a pidfd it returns at once. It
// closes the pidfd.
func (w *exitWaiter) wait() {
	if w.fd < 0 {
		return
	}
	if err := unix.SetNonblock(w.fd, true); err != nil {
		unix.Close(w.fd)
		return
	}
	f := os.NewFile(uintptr(w.fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd turns readable when its process exits; the WNOHANG check
	// covers an exit before the poller saw the descriptor, and any error
	// falls back to cmd.Wait.
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != nil || info.Signo != 0
	})
}

// close releases a pidfd that wait will not (the start failed).
func (w *exitWaiter) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}
