package docker

import (
	"context"
	"io/fs"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Symlink makes p a link to target in the container; see
// sftpops.FS.Symlink.
func (w *Workspace) Symlink(ctx context.Context, target, p string) error {
	defer w.use()()
	files, err := w.files(ctx, "docker.Symlink", p)
	if err != nil {
		return err
	}
	return files.Symlink(ctx, target, p)
}

// Readlink returns the target of the link at p; see sftpops.FS.Readlink.
func (w *Workspace) Readlink(ctx context.Context, p string) (string, error) {
	defer w.use()()
	files, err := w.files(ctx, "docker.Readlink", p)
	if err != nil {
		return "", err
	}
	return files.Readlink(ctx, p)
}

// Chmod sets p's permission bits; see sftpops.FS.Chmod.
func (w *Workspace) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	defer w.use()()
	files, err := w.files(ctx, "docker.Chmod", p)
	if err != nil {
		return err
	}
	return files.Chmod(ctx, p, mode)
}

var _ opsapi.TreeOperations = (*Workspace)(nil)
