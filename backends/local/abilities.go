package local

import (
	"context"
	"io/fs"
	"path/filepath"

	"github.com/wsbroker/wsbroker/opsapi"
)

// DiskUsage is what the workspace's own filesystem uses, when it has one.
// Otherwise it walks the workspace directory and adds up its regular
// files' sizes; entries that vanish or cannot be read are skipped. ctx ending
// stops the walk with ErrCanceled or ErrTimeout.
func (w *Workspace) DiskUsage(ctx context.Context) (int64, error) {
	if w.disk > 0 {
		// Its own filesystem: one statfs, exact, whatever the tree.
		d, err := w.Disk()
		return d.UsedBytes, err
	}
	var total int64
	err := filepath.WalkDir(w.root, func(_ string, e fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			return nil
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, opsapi.E("local.DiskUsage", w.root, nil, err)
	}
	return total, nil
}

var _ opsapi.DiskMeasurer = (*Workspace)(nil)
