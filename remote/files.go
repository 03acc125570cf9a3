package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// Files is the workspace's file operations, made at the first use, when
// the agent (or the Fallback) has told the account's ids. op and p name
// the call in errors.
func (w *Workspace) Files(ctx context.Context, op, p string) (*sftpops.FS, error) {
	if err := w.GoneErr(op, p); err != nil {
		return nil, err
	}
	if fs := w.fs.Load(); fs != nil {
		return fs, nil
	}
	id, err := w.identity(ctx, op, p)
	if err != nil {
		return nil, err
	}
	opt := sftpops.Options{Identity: &id, Logger: w.logger, Op: w.cfg.Op, NoSync: w.cfg.NoSync}
	if !w.cfg.SFTPAlways {
		opt.ReadFile, opt.WriteFile, opt.ReadDir = w.readFile, w.writeFile, w.readDir
	}
	fs := sftpops.New(w.sftpClient, w.cfg.Root, opt)
	w.fs.CompareAndSwap(nil, fs)
	return w.fs.Load(), nil
}

// identity is the account file operations run as: the agent's, else the
// Fallback's.
func (w *Workspace) identity(ctx context.Context, op, p string) (sftpops.Identity, error) {
	a, err := w.filesAgent(ctx)
	switch {
	case errors.Is(err, ErrNoAgent):
		return w.cfg.Fallback.Identity(ctx)
	case err != nil:
		return sftpops.Identity{}, agentErr(ctx, op, p, err)
	}
	id, err := a.Identity(ctx)
	if err != nil {
		return sftpops.Identity{}, opsapi.E(op, p, opsapi.ErrUnavailable, fmt.Errorf("asking the agent for its account: %w", err))
	}
	return sftpops.Identity{UID: id.UID, GIDs: id.GIDs}, nil
}

// filesAgent is the agent for file operations: ErrNoAgent when they go
// through the Fallback, which must then be there.
func (w *Workspace) filesAgent(ctx context.Context) (*agentclient.Client, error) {
	var a *agentclient.Client
	err := NoAgent("files go over the fallback's SFTP")
	if !w.cfg.SFTPAlways {
		a, err = w.Agent(ctx)
	}
	if errors.Is(err, ErrNoAgent) && w.cfg.Fallback == nil {
		return nil, opsapi.E(w.op("files"), "", opsapi.ErrUnavailable, fmt.Errorf("the workspace's agent is not there (%s), and it has no other way in", err))
	}
	return a, err
}

// sftpClient is the SFTP stream over the agent, else the Fallback's
// (sftpops.ClientFunc).
func (w *Workspace) sftpClient(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
	op := w.op("sftp")
	a, err := w.filesAgent(ctx)
	switch {
	case errors.Is(err, ErrNoAgent):
		return w.cfg.Fallback.SFTP(ctx, broken)
	case err != nil:
		return nil, agentErr(ctx, op, "", err)
	}
	sc, err := a.SFTP(ctx, broken)
	if err != nil {
		return nil, opsapi.E(op, "", nil, fmt.Errorf("sftp over the agent: %w", err))
	}
	return sc, nil
}

// readFile, readDir and writeFile are the agent's raw file calls (see
// sftpops.Options); without the agent they answer errors.ErrUnsupported,
// which sends sftpops back to SFTP. The first two are retried once on a
// new connection when the old one was lost, as SFTP's calls are; a write
// is not (its reader may be half read).
func (w *Workspace) readFile(ctx context.Context, abs string) (io.ReadCloser, error) {
	return retried(ctx, w, func(a *agentclient.Client) (io.ReadCloser, error) { return a.ReadFile(ctx, abs) })
}

func (w *Workspace) readDir(ctx context.Context, abs string) ([]opsapi.FileInfo, error) {
	return retried(ctx, w, func(a *agentclient.Client) ([]opsapi.FileInfo, error) { return a.ReadDir(ctx, abs) })
}

func (w *Workspace) writeFile(ctx context.Context, abs string, r io.Reader, sync bool) error {
	a, err := w.Agent(ctx)
	if errors.Is(err, ErrNoAgent) {
		return errors.ErrUnsupported
	}
	if err != nil {
		return err
	}
	return a.WriteFile(ctx, abs, r, sync)
}

func retried[T any](ctx context.Context, w *Workspace, call func(*agentclient.Client) (T, error)) (T, error) {
	var zero T
	a, err := w.Agent(ctx)
	if errors.Is(err, ErrNoAgent) {
		return zero, errors.ErrUnsupported
	}
	if err != nil {
		return zero, err
	}
	v, err := call(a)
	if err != nil && a.IsClosed() && ctx.Err() == nil {
		if a, err = w.Agent(ctx); err != nil {
			return zero, err
		}
		return call(a)
	}
	return v, err
}

// withFiles runs call on the file operations, the workspace busy
// meanwhile.
func withFiles[T any](ctx context.Context, w *Workspace, name, p string, call func(*sftpops.FS) (T, error)) (T, error) {
	defer w.Use()()
	fs, err := w.Files(ctx, w.op(name), p)
	if err != nil {
		var zero T
		return zero, err
	}
	return call(fs)
}

// do is withFiles for a call that returns only an error.
func do(ctx context.Context, w *Workspace, name, p string, call func(*sftpops.FS) error) error {
	_, err := withFiles(ctx, w, name, p, func(fs *sftpops.FS) (struct{}, error) { return struct{}{}, call(fs) })
	return err
}

// Open opens a regular file for reading; see sftpops.FS.Open. The
// workspace stays busy until the file is closed.
func (w *Workspace) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	done := w.Use()
	fs, err := w.Files(ctx, w.op("Open"), p)
	if err != nil {
		done()
		return nil, err
	}
	rc, err := fs.Open(ctx, p)
	if err != nil {
		done()
		return nil, err
	}
	return &usedReader{ReadCloser: rc, done: done}, nil
}

// usedReader keeps the workspace busy until the file is closed.
type usedReader struct {
	io.ReadCloser
	done func()
	once atomic.Bool
}

func (r *usedReader) Close() error {
	if !r.once.Swap(true) {
		defer r.done()
	}
	return r.ReadCloser.Close()
}

// Access checks p against the account's ids; see sftpops.FS.Access.
func (w *Workspace) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	return do(ctx, w, "Access", p, func(fs *sftpops.FS) error { return fs.Access(ctx, p, mode) })
}

// WriteFile replaces p atomically; see sftpops.FS.WriteFile.
func (w *Workspace) WriteFile(ctx context.Context, p string, r io.Reader) error {
	return do(ctx, w, "WriteFile", p, func(fs *sftpops.FS) error { return fs.WriteFile(ctx, p, r) })
}

// Mkdir creates p and its parents; see sftpops.FS.Mkdir.
func (w *Workspace) Mkdir(ctx context.Context, p string) error {
	return do(ctx, w, "Mkdir", p, func(fs *sftpops.FS) error { return fs.Mkdir(ctx, p) })
}

// Stat describes p, following links; see sftpops.FS.Stat.
func (w *Workspace) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	return withFiles(ctx, w, "Stat", p, func(fs *sftpops.FS) (opsapi.FileInfo, error) { return fs.Stat(ctx, p) })
}

// ReadDir lists p; see sftpops.FS.ReadDir.
func (w *Workspace) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	return withFiles(ctx, w, "ReadDir", p, func(fs *sftpops.FS) ([]opsapi.FileInfo, error) { return fs.ReadDir(ctx, p) })
}

// RealPath resolves every link in p inside the box; see
// sftpops.FS.RealPath.
func (w *Workspace) RealPath(ctx context.Context, p string) (string, error) {
	return withFiles(ctx, w, "RealPath", p, func(fs *sftpops.FS) (string, error) { return fs.RealPath(ctx, p) })
}

// Glob finds files with fd's semantics; see sftpops.FS.Glob.
func (w *Workspace) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	return withFiles(ctx, w, "Glob", req.Dir, func(fs *sftpops.FS) (opsapi.GlobResult, error) { return fs.Glob(ctx, req) })
}

// Symlink makes p a link to target; see sftpops.FS.Symlink.
func (w *Workspace) Symlink(ctx context.Context, target, p string) error {
	return do(ctx, w, "Symlink", p, func(fs *sftpops.FS) error { return fs.Symlink(ctx, target, p) })
}

// Readlink returns the target of the link at p; see sftpops.FS.Readlink.
func (w *Workspace) Readlink(ctx context.Context, p string) (string, error) {
	return withFiles(ctx, w, "Readlink", p, func(fs *sftpops.FS) (string, error) { return fs.Readlink(ctx, p) })
}

// Chmod sets p's permission bits; see sftpops.FS.Chmod.
func (w *Workspace) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	return do(ctx, w, "Chmod", p, func(f *sftpops.FS) error { return f.Chmod(ctx, p, mode) })
}
