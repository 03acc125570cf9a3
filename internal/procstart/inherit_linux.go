package procstart

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInherited marks every descriptor above 2 close-on-exec, so that a
// child gets only its standard streams and the ExtraFiles its caller
// gave it (os/exec dup2s those into place, which clears the mark). Go
// opens every descriptor of its own close-on-exec; what this catches is
// what the broker inherited (a supervisor's, a log redirection's, socket
// activation's) or what code opened without the flag.
//
// close_range (Linux 5.11) does it in one call; before it, each
// descriptor /proc/self/fd lists is marked.
func closeInherited() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("procstart: marking descriptors close-on-exec: %w", err)
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("procstart: marking descriptors close-on-exec: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("procstart: marking descriptors close-on-exec: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 || fd == int(d.Fd()) {
			continue
		}
		// A descriptor closed since the listing answers EBADF: nothing
		// to mark.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("procstart: marking descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}
