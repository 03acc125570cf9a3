package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"sync"

	"github.com/hashicorp/yamux"

	"github.com/wsbroker/wsbroker/remote/sftpserver"
)

// Server serves connections from the broker.
type Server struct {
	// Self is the agent's own executable, re-executed as each command's
	// reaper ("wsb-agent reap").
	Self string
	// Logger receives the agent's diagnostics (stderr of the agent).
	Logger *slog.Logger

	wg sync.WaitGroup

	reapers reaperPool // idle reapers (reapers.go)
}

// ServeConn speaks the protocol on one connection until it ends. It
// returns nil when the broker closed it.
func (s *Server) ServeConn(conn io.ReadWriteCloser) error {
	defer conn.Close()
	if _, err := Hello(conn); err != nil {
		return err
	}
	sess, err := yamux.Server(conn, MuxConfig())
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer sess.Close()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			if sess.IsClosed() || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("agent: accept: %w", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveStream(st)
		}()
	}
}

// Wait waits for every stream's handler to return.
func (s *Server) Wait() { s.wg.Wait() }

// serveStream reads a stream's request and serves it.
func (s *Server) serveStream(st *yamux.Stream) {
	defer st.Close()
	req, err := ReadRequest(st)
	if err != nil {
		s.log().Warn("bad request header", "err", err)
		return
	}
	switch req.Op {
	case OpSFTP:
		if err := sftpserver.Serve(st, st); err != nil && !errors.Is(err, io.EOF) {
			s.log().Debug("sftp session ended", "err", err)
		}
	case OpIdentity:
		id := Identity{UID: os.Getuid(), GIDs: []int{os.Getgid()}}
		if groups, err := os.Getgroups(); err == nil {
			id.GIDs = append(id.GIDs, groups...)
		}
		if err := json.NewEncoder(st).Encode(id); err != nil {
			s.log().Debug("identity", "err", err)
		}
	case OpRead, OpWrite, OpReadDir:
		if !path.IsAbs(req.Path) {
			s.log().Warn("file request without an absolute path", "op", req.Op)
			return
		}
		switch req.Op {
		case OpRead:
			s.serveRead(st, req.Path)
		case OpWrite:
			s.serveWrite(st, req)
		default:
			s.serveReadDir(st, req.Path)
		}
	case OpExec:
		if req.Exec == nil {
			s.log().Warn("exec request without a command")
			return
		}
		s.serveExec(st, *req.Exec)
	default:
		s.log().Warn("unknown request", "op", truncate(req.Op, 32))
	}
}

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// self is the executable to re-execute as a reaper.
func (s *Server) self() string {
	if s.Self != "" {
		return s.Self
	}
	if p, err := os.Executable(); err == nil {
		return p
	}
	return "/proc/self/exe"
}
