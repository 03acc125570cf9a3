package local

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/opsapi"
)

// terminal is a command's pseudo-terminal (ExecRequest.TTY). The command
// holds the slave as stdin, stdout and stderr; the broker reads its
// output from the master, types Stdin into it and resizes it. A nil
// *terminal is a command on pipes.
type terminal struct{ master, slave *os.File }

// newTerminal opens a terminal of size for cmd, or nothing when size is
// nil, and makes cmd lead a session of its own with the slave (its fd 0)
// as controlling terminal.
func newTerminal(cmd *exec.Cmd, size *opsapi.TTYSize) (*terminal, error) {
	if size == nil {
		return nil, nil
	}
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("opening a terminal: %w", err)
	}
	if master, err = pollable(master); err != nil {
		slave.Close()
		return nil, fmt.Errorf("opening a terminal: %w", err)
	}
	t := &terminal{master: master, slave: slave}
	if err := t.setSize(*size); err != nil {
		t.close()
		return nil, fmt.Errorf("sizing the terminal: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A new session's leader also leads a new group, whose id is its pid
	// as killtree.Prepare's would be; setpgid would fail on it. Setsid
	// happens in the fork, so it holds through the v1 cgroup entry's exec.
	cmd.SysProcAttr.Setpgid = false
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
	return t, nil
}

// pollable returns f anew on the network poller, and closes f. pty.Open
// leaves the master blocking (its ioctls take the descriptor through
// Fd): a Read of it would then outlive its Close, and a child that keeps
// the slave open (one ignoring the hangup) would hold the call for ever.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK is the open file's, which the duplicate shares: os.NewFile
	// sees it and puts the descriptor on the poller.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// output is the terminal's end for the command's output, and the
// broker's copy of the slave, to close once the command started: the
// master then reads EIO (the end of output) when the last holder of the
// slave has closed it.
func (t *terminal) output() (r, w *os.File) { return t.master, t.slave }

// setSize sets the terminal's size; the kernel sends SIGWINCH to its
// foreground group. Not pty.Setsize: it takes the descriptor through Fd,
// which would make the master blocking again (see pollable).
func (t *terminal) setSize(size opsapi.TTYSize) error {
	rc, err := t.master.SyscallConn()
	if err != nil {
		return err
	}
	ws := &unix.Winsize{Row: size.Rows, Col: size.Cols}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) }); err != nil {
		return err
	}
	return serr
}

// feed types src at the terminal until src ends or fails. At its end
// nothing more is written: a terminal has no end of input (the command
// reads one from a Ctrl-D src sends). Call it once the command started;
// the copy fails at its next write once the master is closed.
func (t *terminal) feed(src io.Reader) {
	if t == nil || src == nil {
		return
	}
	copyInput(t.master, src, nil)
}

// follow applies each size from sizes until stop is called; stop returns
// once none is being applied.
func (t *terminal) follow(sizes <-chan opsapi.TTYSize) (stop func()) {
	if t == nil || sizes == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case size, ok := <-sizes:
				if !ok {
					return
				}
				_ = t.setSize(size) // fails only once the master is closed
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// close closes both ends (the slave again, when the start failed).
func (t *terminal) close() {
	if t == nil {
		return
	}
	t.master.Close()
	t.slave.Close()
}
