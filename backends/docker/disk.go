package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wsbroker/wsbroker/internal/loopfs"
	"github.com/wsbroker/wsbroker/opsapi"
)

// LabelDisk marks a workspace whose volume is a filesystem of its own:
// its size in bytes.
const LabelDisk = "wsbroker.disk"

// unboundedWarning is what a start says when workspace volumes have no
// size limit.
const unboundedWarning = "workspace volumes are unbounded: a workspace can fill the engine's disk"

// setupDisks decides whether the configured Disk holds, or the default
// one when none is: the broker must be root on the engine's own host (the
// volume is a host directory the engine bind-mounts) with loop devices.
// Where it cannot, workspaces get no size limit, said once here.
func (b *Backend) setupDisks() {
	c := &b.cfg
	if c.DiskDir == "" {
		sum := sha256.Sum256([]byte(c.Identity))
		c.DiskDir = filepath.Join(os.TempDir(), "wsbroker-disks-"+hex.EncodeToString(sum[:6]))
	}
	switch {
	case c.Disk < 0:
		c.Disk = 0
		b.logger.Warn(unboundedWarning, "why", "disk is -1 in the configuration")
		return
	case c.Disk == 0 && len(c.Pools) > 0:
		b.logger.Warn(unboundedWarning, "why", "a warm pool's members cannot have filesystems of their own (disk)")
		return
	case c.Disk == 0:
		if err := b.diskProbe(); err != nil {
			b.logger.Warn(unboundedWarning, "why", "disk is not set, and this host cannot give a volume a filesystem of its own "+
				"(it takes a root broker on the engine's host, with loop devices)", "err", err)
			return
		}
		c.Disk = DefaultDisk
		b.logger.Info("disk limits enforced by the kernel: each workspace volume is a filesystem of its own of the default size",
			"disk", c.Disk, "dir", c.DiskDir)
		return
	}
	if err := b.diskProbe(); err != nil {
		b.logger.Warn("disk limits not enforced: workspace volumes live on the engine's disk with no size limit",
			"disk", c.Disk, "err", err)
		c.Disk = 0
		return
	}
	b.logger.Info("disk limits enforced by the kernel: each workspace volume is a filesystem of its own",
		"disk", c.Disk, "dir", c.DiskDir)
}

// diskProbe says why workspace volumes cannot be filesystems of their
// own here, nil when they can.
func (b *Backend) diskProbe() error {
	if !b.localEngine() {
		return fmt.Errorf("the engine at %s is not on this host", b.cfg.Host)
	}
	if err := os.MkdirAll(b.cfg.DiskDir, 0o700); err != nil {
		return err
	}
	return probeDisks(b.cfg.DiskDir)
}

// probeDisks is loopfs.Probe; tests stand in a host that cannot.
var probeDisks = loopfs.Probe

// localEngine says whether the engine is reached through a Unix socket,
// so shares this host's filesystems.
func (b *Backend) localEngine() bool {
	return strings.HasPrefix(b.cfg.Host, "unix://")
}

// diskPaths are workspace id's filesystem image and its mount point on
// the host, which the volume binds.
func (b *Backend) diskPaths(id string) (image, dir string) {
	dir = filepath.Join(b.cfg.DiskDir, id)
	return dir + ".img", dir
}

// makeDisk makes the filesystem of a new workspace's volume and returns
// the volume's driver options, which bind its mount point.
func (b *Backend) makeDisk(ctx context.Context, id string, size int64) (map[string]string, error) {
	const op = "docker.Create"
	if err := b.diskProbe(); err != nil {
		return nil, opsapi.E(op, id, opsapi.ErrInvalid,
			fmt.Errorf("options: limits.disk: this host cannot give a workspace volume a filesystem of its own: %w", err))
	}
	image, dir := b.diskPaths(id)
	// A leftover of an earlier workspace of that name (checkFree saw no
	// volume): never hand its files on.
	if err := b.removeDisk(ctx, id); err != nil {
		return nil, opsapi.E(op, id, opsapi.ErrUnavailable, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, opsapi.E(op, id, nil, err)
	}
	// Root's: the engine copies the image's directory in, ownership
	// included, at the first start.
	if err := loopfs.Make(ctx, image, dir, size, 0, 0); err != nil {
		os.Remove(dir)
		return nil, opsapi.E(op, id, opsapi.ErrUnavailable, err)
	}
	return map[string]string{"type": "none", "o": "bind", "device": dir}, nil
}

// mountDisk mounts workspace id's filesystem again where it is not (the
// host rebooted), and says whether it had to.
func (b *Backend) mountDisk(ctx context.Context, id string) (mounted bool, err error) {
	image, dir := b.diskPaths(id)
	if _, err := os.Stat(image); err != nil {
		return false, err
	}
	if ok, err := loopfs.Mounted(dir); err != nil || ok {
		return false, err
	}
	return true, loopfs.Mount(ctx, image, dir)
}

// removeDisk unmounts workspace id's filesystem and deletes it, if it has
// one.
func (b *Backend) removeDisk(ctx context.Context, id string) error {
	image, dir := b.diskPaths(id)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := loopfs.Remove(ctx, image, dir); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// diskOfLabels is the size a workspace's labels give its filesystem, 0 for
// none.
func diskOfLabels(labels map[string]string) int64 {
	n, err := strconv.ParseInt(labels[LabelDisk], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// DiskLimit is opsapi.DiskSizer's: the size of the filesystem a Create
// with these options would give.
func (b *Backend) DiskLimit(options json.RawMessage) int64 {
	o, err := decodeCreateOptions(options)
	if err != nil {
		return 0
	}
	s, err := b.resolve(o)
	if err != nil {
		return 0
	}
	return s.disk
}

// Disk is opsapi.DiskLimiter's: the workspace volume's own filesystem,
// measured on the host.
func (w *Workspace) Disk() (opsapi.Disk, error) {
	x := w.box
	if x.disk == 0 {
		return opsapi.Disk{}, nil
	}
	_, dir := x.b.diskPaths(x.id)
	used, _, err := loopfs.Usage(dir)
	if err != nil {
		return opsapi.Disk{}, opsapi.E("docker.Disk", x.id, nil, err)
	}
	return opsapi.Disk{UsedBytes: used, LimitBytes: x.disk}, nil
}

var (
	_ opsapi.DiskSizer   = (*Backend)(nil)
	_ opsapi.DiskLimiter = (*Workspace)(nil)
)
