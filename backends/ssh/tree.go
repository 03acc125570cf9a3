package ssh

import (
	"context"
	"io/fs"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Symlink makes p a link to target on the host; see sftpops.FS.Symlink.
func (w *Workspace) Symlink(ctx context.Context, target, p string) error {
	if err := w.gone("ssh.Symlink", p); err != nil {
		return err
	}
	return w.fs.Symlink(ctx, target, p)
}

// Readlink returns the target of the link at p; see sftpops.FS.Readlink.
func (w *Workspace) Readlink(ctx context.Context, p string) (string, error) {
	if err := w.gone("ssh.Readlink", p); err != nil {
		return "", err
	}
	return w.fs.Readlink(ctx, p)
}

// Chmod sets p's permission bits; see sftpops.FS.Chmod.
func (w *Workspace) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	if err := w.gone("ssh.Chmod", p); err != nil {
		return err
	}
	return w.fs.Chmod(ctx, p, mode)
}

var _ opsapi.TreeOperations = (*Workspace)(nil)
