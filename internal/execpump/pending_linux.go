package execpump

import (
	"os"

	"golang.org/x/sys/unix"
)

// PipePending says how many bytes wait unread in the output pipe r
// (FIONREAD), so the drain after the shell's exit never takes a reader
// that was not scheduled yet for silence (Config.Pending); nil when r is not pollable.
func PipePending(r *os.File) func() int {
	rc, err := r.SyscallConn()
	if err != nil {
		return nil
	}
	return func() int {
		n := 0
		_ = rc.Control(func(fd uintptr) {
			if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				n = v
			}
		})
		return n
	}
}
