//go:build !linux

package local

import (
	"context"
	"os"
	"path"

	"github.com/wsbroker/wsbroker/opsapi"
)

// describeEntries describes names, entries read from the open directory
// d (canon, relative to the root), as Stat would: one Lstat through the
// root each (Linux does it with fstatat on d).
func (w *Workspace) describeEntries(ctx context.Context, _ *os.File, canon string, names []string) ([]opsapi.FileInfo, error) {
	out := make([]opsapi.FileInfo, 0, len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fi, err := w.describe(path.Join(canon, n), n); err == nil {
			out = append(out, fi) // else removed while listing
		}
	}
	return out, nil
}
