package agent

import (
	"fmt"
	"os"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ttyExitWait is how long a terminal's relay, woken by the command's
// exit, keeps reading before the exit's frame may go. A terminal has no
// count of what it holds that covers what is still on its way (the
// kernel moves what the command wrote to the master's side from a work
// queue): the relay normally reads to the terminal's end (EIO, every
// holder closed it) well within it, and waits it out only while a
// background process still holds the terminal.
const ttyExitWait = 50 * time.Millisecond

// openTTY opens a pseudo-terminal of the given size. The master comes
// back in non-blocking mode, so that a deadline wakes its reader and a
// Close its writer as for a pipe (pty.Open's own master is blocking: it
// takes the descriptor with Fd); the slave is for the command.
func openTTY(size TTYSize) (master, slave *os.File, err error) {
	m, s, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	defer m.Close()
	if err := pty.Setsize(s, &pty.Winsize{Rows: size.Rows, Cols: size.Cols}); err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal size: %w", err)
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		err = unix.SetNonblock(fd, true)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	return os.NewFile(uintptr(fd), "ptmx"), s, nil
}

// dupTTY returns another descriptor of the master, the stdin feed's own:
// the feed closes it at the end of stdin while the relay still reads.
// The master's mode, non-blocking, is shared.
func dupTTY(master *os.File) (*os.File, error) {
	fd := -1
	err := control(master, func(m int) error {
		var err error
		fd, err = unix.FcntlInt(uintptr(m), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	return os.NewFile(uintptr(fd), "ptmx"), nil
}

// setTTYSize sets the terminal's size through its master; the kernel
// signals SIGWINCH to its foreground process group. Not pty.Setsize: it
// takes the descriptor with Fd, which would make the master blocking.
func setTTYSize(master *os.File, size TTYSize) error {
	return control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	})
}

// control runs fn on f's descriptor, leaving its mode alone.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// parseResize reads FrameResize's payload: "rows cols", each a decimal
// from 0 to 65535, digits only (no sign, no leading zero), one space
// between.
func parseResize(p []byte) (TTYSize, bool) {
	rows, rest, ok := parseDim(p)
	if !ok || len(rest) == 0 || rest[0] != ' ' {
		return TTYSize{}, false
	}
	cols, rest, ok := parseDim(rest[1:])
	if !ok || len(rest) != 0 {
		return TTYSize{}, false
	}
	return TTYSize{Rows: rows, Cols: cols}, true
}

// parseDim reads one dimension from the start of p.
func parseDim(p []byte) (uint16, []byte, bool) {
	i, n := 0, 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		n = n*10 + int(p[i]-'0')
		i++
		if n > 0xffff {
			return 0, nil, false
		}
	}
	if i == 0 || i > 1 && p[0] == '0' {
		return 0, nil, false
	}
	return uint16(n), p[i:], true
}
