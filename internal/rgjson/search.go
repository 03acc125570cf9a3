package rgjson

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Script runs ripgrep on a remote side: sh -c Script wsbroker RG DIR FILE
// ARGS... searches DIR from inside it, or FILE (in DIR) on stdin when FILE
// is set. A missing rg prints a control line and exits 127. rg gets no
// HOME: it must not read a global gitignore chosen by the workspace.
const Script = `rg=$1 dir=$2 file=$3
shift 3
if ! command -v "$rg" >/dev/null 2>&1; then echo '@wsbroker norg' >&2; exit 127; fi
cd -- "$dir" || exit 2
if [ -n "$file" ]; then exec env HOME=/nonexistent "$rg" "$@" - < "$file"; fi
exec env HOME=/nonexistent "$rg" "$@" .
`

// noRg is Script's control line for a missing ripgrep.
const noRg = "@wsbroker norg"

// Files is what a remote search needs of the workspace's files.
type Files interface {
	Stat(ctx context.Context, p string) (opsapi.FileInfo, error)
	// Abs is p's absolute path on the remote side.
	Abs(op, p string) (string, error)
}

// Process is one ripgrep a backend started.
type Process interface {
	// Stdout is rg's JSON stream.
	Stdout() io.Reader
	// Wait returns rg's exit status once it has ended; err means the
	// transport failed and no status will come.
	Wait() (code int, err error)
	// Close closes rg's streams, so a pending read returns (rg dies of
	// SIGPIPE at its next write). It may be called more than once, from
	// any goroutine.
	Close()
	// Abandon follows Close when the search is cut short: whatever the
	// transport needs so that rg does not run on.
	Abandon()
}

// Remote runs searches on one backend's remote side.
type Remote struct {
	// Op names the operation in errors, e.g. "docker.Search".
	Op string
	// RgPath is ripgrep there, a path or a name on its PATH.
	RgPath string
	// Where ends the error for a missing ripgrep: "in the container".
	Where string
	// Start runs argv (sh -c Script ...) with stderr going to stderr; its
	// errors are returned as they are.
	Start func(ctx context.Context, argv []string, stderr io.Writer) (Process, error)
}

// Search runs `rg --json` (arguments and parsing as Args and Collect give
// them, the same as every backend). A directory is searched from inside
// it, a single file on stdin so its lines carry its base name. A missing
// path is ErrNotExist, an invalid pattern ErrInvalid, ripgrep missing
// ErrUnavailable.
func (r Remote) Search(ctx context.Context, fs Files, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	args, err := Args(req)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	dir, file, fileName, err := r.target(ctx, fs, req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	argv := append([]string{"sh", "-c", Script, "wsbroker", r.RgPath, dir, file}, args...)
	stderr := &execpump.Head{Max: MaxStderrBytes}
	p, err := r.Start(ctx, argv, stderr)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	defer p.Close()
	stop := context.AfterFunc(ctx, p.Close)
	defer stop()
	return r.collect(ctx, p, req, fileName, stderr)
}

// target is where rg starts (dir) and the file it reads on stdin, if any.
func (r Remote) target(ctx context.Context, fs Files, p string) (dir, file, fileName string, err error) {
	fi, err := fs.Stat(ctx, p)
	if err != nil {
		return "", "", "", err
	}
	abs, err := fs.Abs("Search", p)
	if err != nil {
		return "", "", "", err
	}
	switch fi.Type {
	case opsapi.TypeDir:
		return abs, "", "", nil
	case opsapi.TypeFile:
		dir, file = path.Split(abs)
		return dir, file, path.Base(abs), nil
	}
	return "", "", "", opsapi.E(r.Op, p, opsapi.ErrInvalid, errors.New("not a regular file or directory"))
}

// collect reads rg's results, stops it when they are cut short, and turns
// its exit into the result.
func (r Remote) collect(ctx context.Context, p Process, req opsapi.SearchRequest, fileName string, stderr *execpump.Head) (opsapi.SearchResult, error) {
	res, stopped, perr := Collect(p.Stdout(), req, fileName)
	code, werr := 0, error(nil)
	if stopped || perr != nil || ctx.Err() != nil {
		p.Close()
		p.Abandon()
	} else {
		// rg's summary and anything after the results; an error here
		// shows again as the status.
		_, _ = io.Copy(io.Discard, p.Stdout())
		code, werr = p.Wait()
	}
	if err := ctx.Err(); err != nil {
		return opsapi.SearchResult{}, opsapi.E(r.Op, req.Path, nil, err)
	}
	if stopped {
		return res, nil
	}
	if perr != nil {
		return opsapi.SearchResult{}, opsapi.E(r.Op, req.Path, nil, perr)
	}
	if werr != nil {
		return opsapi.SearchResult{}, opsapi.E(r.Op, req.Path, opsapi.ErrUnavailable, werr)
	}
	if code == 127 && strings.Contains(stderr.String(), noRg) {
		return opsapi.SearchResult{}, opsapi.E(r.Op, req.Path, opsapi.ErrUnavailable,
			fmt.Errorf("ripgrep (%s) is not available %s", r.RgPath, r.Where))
	}
	return Result(r.Op, req.Path, res, code, stderr.String())
}
