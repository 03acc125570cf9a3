package ssh

import (
	"context"
	"fmt"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"io"

	"golang.org/x/crypto/ssh"

	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// Open opens a regular file for reading over SFTP; see sftpops.FS.Open.
func (w *Workspace) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := w.gone("ssh.Open", p); err != nil {
		return nil, err
	}
	return w.fs.Open(ctx, p)
}

// Access checks p against the account's ids; see sftpops.FS.Access.
func (w *Workspace) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	if err := w.gone("ssh.Access", p); err != nil {
		return err
	}
	return w.fs.Access(ctx, p, mode)
}

// WriteFile replaces p atomically; see sftpops.FS.WriteFile.
func (w *Workspace) WriteFile(ctx context.Context, p string, r io.Reader) error {
	if err := w.gone("ssh.WriteFile", p); err != nil {
		return err
	}
	return w.fs.WriteFile(ctx, p, r)
}

// Mkdir creates p and its parents; see sftpops.FS.Mkdir.
func (w *Workspace) Mkdir(ctx context.Context, p string) error {
	if err := w.gone("ssh.Mkdir", p); err != nil {
		return err
	}
	return w.fs.Mkdir(ctx, p)
}

// Stat describes p, following links; see sftpops.FS.Stat.
func (w *Workspace) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	if err := w.gone("ssh.Stat", p); err != nil {
		return opsapi.FileInfo{}, err
	}
	return w.fs.Stat(ctx, p)
}

// ReadDir lists p; see sftpops.FS.ReadDir.
func (w *Workspace) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	if err := w.gone("ssh.ReadDir", p); err != nil {
		return nil, err
	}
	return w.fs.ReadDir(ctx, p)
}

// RealPath resolves every link in p on the host; see sftpops.FS.RealPath.
func (w *Workspace) RealPath(ctx context.Context, p string) (string, error) {
	if err := w.gone("ssh.RealPath", p); err != nil {
		return "", err
	}
	return w.fs.RealPath(ctx, p)
}

// Glob finds files with fd's semantics over SFTP; see sftpops.FS.Glob.
func (w *Workspace) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	if err := w.gone("ssh.Glob", req.Dir); err != nil {
		return opsapi.GlobResult{}, err
	}
	return w.fs.Glob(ctx, req)
}

// Exec runs req.Command as `Shell -c Command` on the host, in one session,
// under the remoteexec wrapper: its own process group and session, a
// marker in its environment (WSBROKER_CALL, and the workspace's
// WSBROKER_WORKSPACE), stdout and stderr on one stream. A deadline or
// cancel kills the whole remote tree through a second session. The
// environment is the account's login environment plus LANG=C.UTF-8,
// TERM=dumb and req.Env. A connection lost mid-command is ErrUnavailable;
// the command's processes are killed after the reconnect.
func (w *Workspace) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	const op = "ssh.Exec"
	if err := w.gone(op, req.Cwd); err != nil {
		return opsapi.ExecResult{}, err
	}
	if err := remoteexec.CheckRequest(req, workspaceKey); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrInvalid, err)
	}
	if a := w.host.agentFor(ctx); a != nil {
		return w.agentExec(ctx, a, req)
	}
	return w.host.runner.Exec(ctx, req, opsapi.Resolve(w.root, req.Cwd), w.marker)
}

// Search runs `rg --json` on the host, in a session of its own; see
// rgjson.Remote.Search. Ripgrep missing on the host is ErrUnavailable.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	const op = "ssh.Search"
	if err := w.gone(op, req.Path); err != nil {
		return opsapi.SearchResult{}, err
	}
	release := func() {}
	defer func() { release() }()
	remote := rgjson.Remote{Op: op, RgPath: w.host.b.cfg.RgPath, Where: "on host " + w.host.addr,
		Start: func(ctx context.Context, argv []string, stderr io.Writer) (rgjson.Process, error) {
			if a := w.host.agentFor(ctx); a != nil {
				p, err := a.Start(ctx, argv, w.root, []string{w.marker}, stderr)
				if err != nil {
					return nil, opsapi.E(op, req.Path, nil, err)
				}
				return agentSearch{p}, nil
			}
			s, rel, err := w.host.session(ctx, w.host.execSlots)
			if err != nil {
				return nil, opsapi.E(op, req.Path, nil, err)
			}
			release = rel
			stdout, err := s.StdoutPipe()
			if err != nil {
				s.Close()
				return nil, opsapi.E(op, req.Path, nil, err)
			}
			s.Stderr = stderr
			if err := s.Start(commandLine(argv)); err != nil {
				s.Close()
				return nil, opsapi.E(op, req.Path, opsapi.ErrUnavailable, err)
			}
			return &searchSession{s: s, stdout: stdout}, nil
		}}
	return remote.Search(ctx, w.fs, req)
}

// agentSearch is ripgrep run by the agent: closing its stream before rg
// exited kills it, so abandoning needs nothing more.
type agentSearch struct{ *agentclient.Process }

func (agentSearch) Abandon() {}

// searchSession is ripgrep in a session.
type searchSession struct {
	s      *ssh.Session
	stdout io.Reader
}

func (s *searchSession) Stdout() io.Reader { return s.stdout }
func (s *searchSession) Close()            { s.s.Close() }

// Abandon waits until the closed session is gone, so its slot is free
// when the call returns.
func (s *searchSession) Abandon() {
	_, _ = io.Copy(io.Discard, s.stdout)
	_ = s.s.Wait()
}

func (s *searchSession) Wait() (int, error) {
	st, err := exitStatus(s.s.Wait())
	if err != nil {
		return 0, fmt.Errorf("connection lost during the search: %w", err)
	}
	return st.Code, nil
}

// Every tool the ssh backend serves, plus realpath and Destroy.
var (
	_ opsapi.Backend           = (*Backend)(nil)
	_ opsapi.Workspace         = (*Workspace)(nil)
	_ opsapi.TransportReporter = (*Workspace)(nil)
	_ opsapi.Operations        = (*Workspace)(nil)
	_ opsapi.ReadOperations    = (*Workspace)(nil)
	_ opsapi.WriteOperations   = (*Workspace)(nil)
	_ opsapi.EditOperations    = (*Workspace)(nil)
	_ opsapi.BashOperations    = (*Workspace)(nil)
	_ opsapi.GrepOperations    = (*Workspace)(nil)
	_ opsapi.FindOperations    = (*Workspace)(nil)
	_ opsapi.LsOperations      = (*Workspace)(nil)
	_ opsapi.Resolver          = (*Workspace)(nil)
	_ opsapi.Destroyer         = (*Workspace)(nil)
)
