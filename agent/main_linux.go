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

	"github.com/wsbroker/wsbroker/backends/shared/sftpserver"
)

// Main is the agent binary's main; it returns the exit code.
func Main(args []string) int {
	if len(args) == 0 {
		// As wsb-sftp-server always did: SFTP on stdio.
		args = []string{"sftp-server"}
	}
	switch args[0] {
	case ReapMode:
		undumpable()
		return Reap(args[1:])
	case "sftp-server":
		sftpserver.WidenPipes(os.Stdin, os.Stdout)
		if err := sftpserver.Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "wsb-sftp-server:", err)
			return 1
		}
		return 0
	case "serve":
		undumpable()
		// A write to a connection whose peer died must fail, not kill the
		// agent before it has killed what that peer was running.
		absorbSignals(syscall.SIGPIPE)
		reserveThreads(agentThreads)
		go reapChildren()
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		s := &Server{Logger: logger}
		// The first command finds its reaper started too.
		go s.refillReapers()
		switch {
		case len(args) == 2 && args[1] == "--stdio":
			err := s.ServeConn(stdio{})
			// The connection is gone (sshd killed, the network lost):
			// each stream's handler kills the command it was running,
			// as nobody waits for it anymore, before the agent exits.
			s.Wait()
			return exitCode(err)
		case len(args) == 3 && args[1] == "--socket":
			return exitCode(serveSocket(s, args[2]))
		}
	}
	return usage()
}

func usage() int {
	fmt.Fprintln(os.Stderr, "usage: wsb-sftp-server [serve --socket PATH | serve --stdio | sftp-server]")
	return 2
}

func exitCode(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "wsb-sftp-server:", err)
		return 1
	}
	return 0
}

// serveSocket reads the agent's keys from stdin, listens, says "ready" on
// stdout and then lets go of its stdio (the exec that started it ends
// its attach).
func serveSocket(s *Server, path string) error {
	line, err := bufio.NewReaderSize(os.Stdin, 16<<10).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading keys from stdin: %w", err)
	}
	var creds Creds
	if err := json.Unmarshal(line, &creds); err != nil {
		return fmt.Errorf("reading keys from stdin: %w", err)
	}
	return s.ListenAndServe(path, creds, func() {
		fmt.Fprintln(os.Stdout, "ready")
		if devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
			_ = unix.Dup3(int(devnull.Fd()), 0, 0)
			_ = unix.Dup3(int(devnull.Fd()), 1, 0)
			// stderr too: a Go program writing to a closed pipe on fd 2
			// dies of SIGPIPE.
			_ = unix.Dup3(int(devnull.Fd()), 2, 0)
		}
	})
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
func undumpable() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
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
