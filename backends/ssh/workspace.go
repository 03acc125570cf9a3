package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/wsbroker/wsbroker/backends/shared/remoteexec"
	"github.com/wsbroker/wsbroker/backends/shared/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
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
	return w.host.runner.Exec(ctx, req, opsapi.Resolve(w.root, req.Cwd), w.marker)
}

// searchScript runs ripgrep on the host: sh -c searchScript wsbroker RG
// DIR FILE ARGS... searches DIR from inside it, or FILE (in DIR) on stdin
// when FILE is set. A missing rg prints a control line and exits 127. rg
// gets no HOME: it must not read a global gitignore chosen by the
// workspace.
const searchScript = `rg=$1 dir=$2 file=$3
shift 3
if ! command -v "$rg" >/dev/null 2>&1; then echo '@wsbroker norg' >&2; exit 127; fi
cd -- "$dir" || exit 2
if [ -n "$file" ]; then exec env HOME=/nonexistent "$rg" "$@" - < "$file"; fi
exec env HOME=/nonexistent "$rg" "$@" .
`

// Search runs `rg --json` on the host (arguments and parsing as package
// rgjson gives them, the same as every backend). A directory is searched
// from inside it, a single file on stdin so its lines carry its base name.
// A missing path is ErrNotExist, an invalid pattern ErrInvalid, ripgrep
// missing on the host ErrUnavailable.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	const op = "ssh.Search"
	if err := w.gone(op, req.Path); err != nil {
		return opsapi.SearchResult{}, err
	}
	args, err := rgjson.Args(req)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	fi, err := w.fs.Stat(ctx, req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	abs, err := w.fs.Abs("Search", req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	dir, file, fileName := abs, "", ""
	switch fi.Type {
	case opsapi.TypeDir:
	case opsapi.TypeFile:
		dir, file = path.Split(abs)
		fileName = path.Base(abs)
	default:
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrInvalid, errors.New("not a regular file or directory"))
	}
	argv := append([]string{"sh", "-c", searchScript, "wsbroker", w.host.b.cfg.RgPath, dir, file}, args...)

	s, release, err := w.host.session(ctx, w.host.execSlots)
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, err)
	}
	defer release()
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	stdout, err := s.StdoutPipe()
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, err)
	}
	stderr := &capBuffer{max: rgjson.MaxStderrBytes}
	s.Stderr = stderr
	if err := s.Start(commandLine(argv)); err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrUnavailable, err)
	}
	res, stopped, perr := rgjson.Collect(stdout, req, fileName)
	if stopped || perr != nil {
		s.Close() // rg dies of SIGPIPE at its next write
	}
	_, _ = io.Copy(io.Discard, stdout)
	st, werr := exitStatus(s.Wait())
	if err := ctx.Err(); err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, err)
	}
	if stopped {
		return res, nil
	}
	if perr != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, perr)
	}
	if werr != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrUnavailable, fmt.Errorf("connection lost during the search: %w", werr))
	}
	if st.Code == 127 && strings.Contains(stderr.String(), "@wsbroker norg") {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrUnavailable,
			fmt.Errorf("ripgrep (%s) is not available on host %s", w.host.b.cfg.RgPath, w.host.addr))
	}
	return rgjson.Result(op, req.Path, res, st.Code, stderr.String())
}

// capBuffer keeps the first max bytes written to it.
type capBuffer struct {
	b   strings.Builder
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capBuffer) String() string { return c.b.String() }

// Every tool the ssh backend serves, plus realpath and Destroy.
var (
	_ opsapi.Backend         = (*Backend)(nil)
	_ opsapi.Workspace       = (*Workspace)(nil)
	_ opsapi.Operations      = (*Workspace)(nil)
	_ opsapi.ReadOperations  = (*Workspace)(nil)
	_ opsapi.WriteOperations = (*Workspace)(nil)
	_ opsapi.EditOperations  = (*Workspace)(nil)
	_ opsapi.BashOperations  = (*Workspace)(nil)
	_ opsapi.GrepOperations  = (*Workspace)(nil)
	_ opsapi.FindOperations  = (*Workspace)(nil)
	_ opsapi.LsOperations    = (*Workspace)(nil)
	_ opsapi.Resolver        = (*Workspace)(nil)
	_ opsapi.Destroyer       = (*Workspace)(nil)
)
