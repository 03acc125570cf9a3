package local

import (
	"context"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/wsbroker/wsbroker/internal/globwalk"
	"github.com/wsbroker/wsbroker/opsapi"
)

// maxIgnoreFileBytes caps what is read of one .gitignore-like file.
const maxIgnoreFileBytes = 1 << 20

// Glob finds files under req.Dir with fd's semantics (see package
// globwalk), walking through the os.Root without following links. Ignore
// files from the workspace root down to req.Dir apply. A missing Dir is
// ErrNotExist, a file ErrNotDir, an invalid pattern ErrInvalid.
func (w *Workspace) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	const op = "local.Glob"
	rel, err := w.rel(op, req.Dir)
	if err != nil {
		return opsapi.GlobResult{}, err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return opsapi.GlobResult{}, mapErr(op, req.Dir, err)
	}
	fi, err := w.fsroot.Stat(canon)
	if err != nil {
		return opsapi.GlobResult{}, mapErr(op, req.Dir, err)
	}
	if !fi.IsDir() {
		return opsapi.GlobResult{}, opsapi.E(op, req.Dir, opsapi.ErrNotDir, nil)
	}
	res, err := globwalk.Glob(ctx, rootFS{w.fsroot}, globwalk.Request{
		Dir:     canon,
		Top:     ".",
		Pattern: req.Pattern,
		Ignore:  req.Ignore,
		Limit:   req.Limit,
	})
	if err != nil {
		return opsapi.GlobResult{}, mapErr(op, req.Dir, err)
	}
	return res, nil
}

// rootFS is globwalk's view of the workspace: names relative to the root,
// every access through it.
type rootFS struct{ root *os.Root }

func (r rootFS) ReadDir(ctx context.Context, dir string) ([]fs.DirEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := r.root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

func (r rootFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	f, err := r.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fs.ErrInvalid
	}
	return io.ReadAll(io.LimitReader(f, maxIgnoreFileBytes))
}
