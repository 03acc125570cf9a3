package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/internal/procstart"
	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Search runs ripgrep where the files are, with the arguments and the
// bounded-memory reading of package rgjson:
//
//	rg --json --line-number --color=never --hidden --no-config
//	   [--ignore-case] [--fixed-strings] [--glob G] [--context N] -- PATTERN TARGET
//
// A directory is searched from inside it (target ".", paths relative to it
// without "./"), entered through a descriptor opened via the root; a
// single file is opened via the root and fed on stdin, so its Path is its
// base name and no link swapped in later is followed. ripgrep never
// follows links while walking. Up to Limit matches are kept with their
// context lines (but not the leading context of the first match past the
// limit); LimitReached is set when another match exists, and ripgrep is
// then stopped. Each line's text is cut at 64 KiB and invalid UTF-8 is
// replaced. An invalid pattern or glob is ErrInvalid with ripgrep's
// message, a missing rg ErrUnavailable.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	const op = "local.Search"
	args, err := rgjson.Args(req)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	f, fi, err := w.openSearchTarget(op, req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	defer f.Close()
	rg, err := lookPath(w.cfg.RgPath)
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrUnavailable, errors.New("ripgrep (rg) is not available"))
	}
	cmd, fileName, err := w.rgCommand(ctx, rg, args, req.Path, f, fi)
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrInvalid, err)
	}
	stderr := &execpump.Head{Max: rgjson.MaxStderrBytes}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, err)
	}
	if err := procstart.Start(cmd); err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrUnavailable, fmt.Errorf("failed to run ripgrep: %w", err))
	}

	res, stopped, perr := rgjson.Collect(stdout, req, fileName)
	if stopped || perr != nil {
		_ = cmd.Process.Kill() // limit reached, or output we cannot read
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()

	if err := ctx.Err(); err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, err)
	}
	if stopped {
		return res, nil
	}
	if perr != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, perr)
	}
	if errors.Is(werr, exec.ErrWaitDelay) {
		// rg exited 0; only its stderr copy was late, and stderr
		// carries nothing a successful search needs.
		werr = nil
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		return rgjson.Result(op, req.Path, res, ee.ExitCode(), stderr.String())
	} else if werr != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, werr)
	}
	return res, nil
}

// openSearchTarget opens p via the root, without following a link swapped
// in later, and describes it.
func (w *Workspace) openSearchTarget(op, p string) (*os.File, os.FileInfo, error) {
	rel, err := w.rel(op, p)
	if err != nil {
		return nil, nil, err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return nil, nil, mapErr(op, p, err)
	}
	f, err := w.fsroot.OpenFile(canon, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, mapErr(op, p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, mapErr(op, p, err)
	}
	return f, fi, nil
}

// rgCommand is ripgrep searching the directory f from inside it, or the
// file f (at p) on stdin, named fileName in the results.
func (w *Workspace) rgCommand(ctx context.Context, rg string, args []string, p string, f *os.File, fi os.FileInfo) (cmd *exec.Cmd, fileName string, err error) {
	cmd = exec.CommandContext(ctx, rg, args...)
	// rg gets no HOME: it must not read a global gitignore from a
	// directory the workspace controls.
	cmd.Env = []string{"PATH=" + basePath, "LANG=C.UTF-8", "HOME=/nonexistent"}
	// rg starts no children, so its pipes close when it exits; the delay
	// only bounds a copy goroutine that a loaded machine schedules late.
	cmd.WaitDelay = 10 * time.Second
	switch {
	case fi.IsDir():
		cmd.Dir = fmt.Sprintf("/proc/self/fd/%d", f.Fd())
		cmd.Args = append(cmd.Args, ".")
	case fi.Mode().IsRegular():
		fileName = path.Base(opsapi.Resolve(w.root, p))
		cmd.Stdin = f
		cmd.Args = append(cmd.Args, "-")
	default:
		return nil, "", errors.New("not a regular file or directory")
	}
	return cmd, fileName, nil
}
