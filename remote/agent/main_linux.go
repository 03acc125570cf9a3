//go:build linux

package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/remote/sftpserver"
)

// Main is the agent binary's main; it returns the exit code.
func Main(args []string) int {
	if len(args) == 0 {
		// As wsb-agent always did: SFTP on stdio.
		args = []string{"sftp-server"}
	}
	switch args[0] {
	case ReapMode:
		if err := undumpable(); err != nil {
			fmt.Fprintln(os.Stderr, "wsb-agent reap:", err)
			return 1
		}
		return Reap(args[1:])
	case "sftp-server":
		sftpserver.WidenPipes(os.Stdin, os.Stdout)
		if err := sftpserver.Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "wsb-agent:", err)
			return 1
		}
		return 0
	case "serve":
		return serveMain(args[1:])
	}
	return usage()
}

func usage() int {
	fmt.Fprintln(os.Stderr, "usage: wsb-agent [serve --connect PATH | serve --stdio | sftp-server]")
	return 2
}

// serveMain is the agent: serve --stdio (the protocol on stdin and
// stdout) or serve --connect PATH (keys on stdin, then TLS on a
// connection to the broker's socket at PATH).
func serveMain(args []string) int {
	onStdio := len(args) == 1 && args[0] == "--stdio"
	connect := len(args) == 2 && args[0] == "--connect"
	if !onStdio && !connect {
		return usage()
	}
	// Before anything is read: the keys must never sit in a process
	// whose memory a command of the same user can read.
	if err := undumpable(); err != nil {
		return exitCode(err)
	}
	// A write to a connection whose peer died must fail, not kill the
	// agent before it has killed what that peer was running.
	absorbSignals(syscall.SIGPIPE)
	reserveThreads(agentThreads)
	go reapChildren()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := &Server{Logger: logger}
	if onStdio {
		// The first command finds its reaper started too.
		go s.refillReapers()
		err := s.ServeConn(stdio{})
		// The connection is gone (sshd killed, the network lost):
		// each stream's handler kills the command it was running,
		// as nobody waits for it anymore, before the agent exits.
		s.Wait()
		return exitCode(err)
	}
	creds, err := readKeys(os.Stdin)
	if err != nil {
		return exitCode(err)
	}
	go s.refillReapers()
	return exitCode(s.ConnectAndServe(args[1], creds, func() {
		fmt.Fprintln(os.Stdout, "ready")
		// The exec that started the agent ends its attach: stdout and
		// stderr go nowhere from now on (a Go program writing to a
		// closed pipe on fd 1 or 2 dies of SIGPIPE).
		_ = toDevNull(1, 2)
	}))
}

// toDevNull points each of fds at /dev/null.
func toDevNull(fds ...int) error {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	for _, fd := range fds {
		if err := unix.Dup3(int(devnull.Fd()), fd, 0); err != nil {
			return fmt.Errorf("pointing descriptor %d at %s: %w", fd, os.DevNull, err)
		}
	}
	return nil
}

func exitCode(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "wsb-agent:", err)
		return 1
	}
	return 0
}

// readKeys reads the agent's keys, one JSON line, from stdin. The
// agent is already undumpable (serveMain; checked again here, as the keys
// must never sit in a process whose memory a workspace command of the
// same user can read), and stdin is /dev/null as soon as the line is
// read: nothing more comes on it, and the pipe the keys came through
// does not stay open in the agent.
func readKeys(stdin *os.File) (Creds, error) {
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		return Creds{}, fmt.Errorf("not reading keys: the agent is dumpable (%d, %v)", d, err)
	}
	line, err := bufio.NewReaderSize(stdin, 16<<10).ReadBytes('\n')
	if err != nil {
		return Creds{}, fmt.Errorf("reading keys from stdin: %w", err)
	}
	if err := toDevNull(int(stdin.Fd())); err != nil {
		return Creds{}, fmt.Errorf("closing stdin after the keys: %w", err)
	}
	var creds Creds
	if err := json.Unmarshal(line, &creds); err != nil {
		return Creds{}, fmt.Errorf("reading keys from stdin: %w", err)
	}
	return creds, nil
}

// absorbSignals keeps sigs (all of them when none is given) from ending
// the process. It catches them rather than ignoring them: an ignored
// signal stays ignored in every program a reaper starts (a command that
// ignores SIGPIPE or SIGTERM does not stop when it should), a caught one
// is reset for them.
func absorbSignals(sigs ...os.Signal) {
	signal.Notify(make(chan os.Signal, 1), sigs...)
}

// undumpable keeps processes of the same user (every workspace command)
// from tracing the agent or reading its memory and /proc files.
func undumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_DUMPABLE: %w", err)
	}
	return nil
}

// stdio is stdin and stdout as one connection.
type stdio struct{}

func (stdio) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdio) Close() error {
	os.Stdin.Close()
	return os.Stdout.Close()
}

var _ io.ReadWriteCloser = stdio{}
