package sftpops

import (
	"context"
	"io"
	"io/fs"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/internal/globwalk"
	"github.com/wsbroker/wsbroker/opsapi"
)

// maxIgnoreFileBytes caps what is read of one .gitignore-like file.
const maxIgnoreFileBytes = 1 << 20

// Glob finds files under req.Dir with fd's semantics (package globwalk),
// one SFTP directory listing per directory, never following links. When
// Dir lies inside the root, ignore files from the root down to Dir apply.
// A missing Dir is ErrNotExist, a file ErrNotDir, an invalid pattern
// ErrInvalid.
func (f *FS) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	op := f.op("Glob")
	abs, err := f.Abs("Glob", req.Dir)
	if err != nil {
		return opsapi.GlobResult{}, err
	}
	var res opsapi.GlobResult
	err = f.with(ctx, true, func(c *sftp.Client) error {
		fi, err := c.Stat(abs)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return opsapi.E(op, req.Dir, opsapi.ErrNotDir, nil)
		}
		top := ""
		if opsapi.Within(f.root, abs) {
			top = f.root
		}
		res, err = globwalk.Glob(ctx, globFS{c}, globwalk.Request{
			Dir:     abs,
			Top:     top,
			Pattern: req.Pattern,
			Ignore:  req.Ignore,
			Limit:   req.Limit,
		})
		return err
	})
	if err != nil {
		return opsapi.GlobResult{}, MapErr(op, req.Dir, err)
	}
	return res, nil
}

// globFS is globwalk's view of the remote side: absolute paths over one
// client.
type globFS struct{ c *sftp.Client }

func (g globFS) ReadDir(ctx context.Context, dir string) ([]fs.DirEntry, error) {
	infos, err := g.c.ReadDirContext(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, len(infos))
	for i, fi := range infos {
		out[i] = fs.FileInfoToDirEntry(fi)
	}
	return out, nil
}

func (g globFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Only regular files: a fifo named .gitignore would block the server.
	fi, err := g.c.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fs.ErrInvalid
	}
	file, err := g.c.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(io.LimitReader(file, maxIgnoreFileBytes))
}
