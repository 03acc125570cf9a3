package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsbroker/wsbroker/backends/local/cgroups"
	"github.com/wsbroker/wsbroker/internal/loopfs"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Limits are a workspace's limits: its cgroup's, and the size of a
// filesystem of its own.
type Limits struct {
	cgroups.Limits `yaml:",inline"`
	// DiskBytes gives the workspace a filesystem of its own of this size
	// (package loopfs): writing past it is ENOSPC inside the workspace,
	// whoever writes. Zero means none: the workspace shares the state
	// directory's filesystem, and a tenant's disk quota is kept by
	// measuring it (best effort).
	DiskBytes int64 `json:"diskBytes,omitempty" yaml:"diskBytes"`
}

// Validate rejects negative limits and a disk below loopfs.MinSize.
func (l Limits) Validate() error {
	err := l.Limits.Validate()
	if l.DiskBytes < 0 || l.DiskBytes > 0 && l.DiskBytes < loopfs.MinSize {
		err = errors.Join(err, fmt.Errorf("diskBytes must be 0 (none) or at least %d, got %d", loopfs.MinSize, l.DiskBytes))
	}
	return err
}

// Merge returns l with every zero field taken from d.
func (l Limits) Merge(d Limits) Limits {
	l.Limits = l.Limits.Merge(d.Limits)
	if l.DiskBytes == 0 {
		l.DiskBytes = d.DiskBytes
	}
	return l
}

// IsZero says no limit is set.
func (l Limits) IsZero() bool { return l.Limits.IsZero() && l.DiskBytes == 0 }

// RecommendedDiskBytes is broker serve's DefaultDiskBytes, and the size
// the start's warning suggests when no disk limit is configured: room for
// a repository, its dependencies and a build, each image allocated whole
// when its workspace is made.
const RecommendedDiskBytes = 1 << 30

// sharedDisk is what a start without disk limits warns of.
const sharedDisk = "a workspace's files and its sandboxed /tmp share the state directory's filesystem and can fill it " +
	"for every tenant (and the audit); a tenant's disk quota is kept by measuring them (best effort: a background " +
	"writer overshoots it)"

// openDisks decides whether workspaces get filesystems of their own by
// default: a configured size, else DefaultDiskBytes where the host can
// hold it. A size the host cannot give falls back to measuring (logged
// once here), rather than refusing every create; no size at all (-1, or
// none and no default) is logged too, with whether this host could hold
// one.
func (b *Backend) openDisks() {
	size := b.cfg.Limits.DiskBytes
	switch {
	case size == Unlimited:
		b.cfg.Limits.DiskBytes = 0
		b.logger.Warn("disk limits off (local.limits.diskBytes: -1): " + sharedDisk)
		return
	case size == 0 && b.cfg.DefaultDiskBytes > 0:
		if err := b.diskProbe(); err != nil {
			b.logger.Warn("disk limits off: this host cannot give a workspace a filesystem of its own of the default size "+
				"(it takes a root broker with loop devices): "+sharedDisk, "defaultDiskBytes", b.cfg.DefaultDiskBytes, "err", err)
			return
		}
		b.cfg.Limits.DiskBytes = b.cfg.DefaultDiskBytes
		b.logger.Info("disk limits enforced by the kernel: each workspace is a filesystem of its own of the default size "+
			"(local.limits.diskBytes: -1 turns it off)", "diskBytes", b.cfg.Limits.DiskBytes)
		return
	case size == 0:
		hint := fmt.Sprintf("this host can hold one: set local.limits.diskBytes (e.g. %d)", RecommendedDiskBytes)
		if err := b.diskProbe(); err != nil {
			hint = "this host cannot hold one: " + err.Error()
		}
		b.logger.Warn("disk limits off (local.limits.diskBytes is 0): "+sharedDisk, "hint", hint)
		return
	}
	if err := b.diskProbe(); err != nil {
		b.logger.Warn("disk limits not enforced: workspaces share the state directory's filesystem and a tenant's "+
			"disk quota is kept by measuring them (best effort)", "diskBytes", size, "err", err)
		b.cfg.Limits.DiskBytes = 0
		return
	}
	b.logger.Info("disk limits enforced by the kernel: each workspace is a filesystem of its own", "diskBytes", size)
}

// diskProbe says why this host cannot give workspaces filesystems of
// their own, nil when it can.
func (b *Backend) diskProbe() error {
	dir := b.disksDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return probeDisks(dir)
}

// probeDisks is loopfs.Probe; tests stand in a host that cannot.
var probeDisks = loopfs.Probe

// disksDir holds the workspaces' filesystem images, outside every
// workspace.
func (b *Backend) disksDir() string { return filepath.Join(b.cfg.StateDir, "disks") }

func (b *Backend) diskImage(id string) string { return filepath.Join(b.disksDir(), id+".img") }

// DiskLimit is opsapi.DiskSizer's: the size of the filesystem a Create
// with these options would give.
func (b *Backend) DiskLimit(options json.RawMessage) int64 {
	o, err := parseOptions(options)
	if err != nil {
		return 0
	}
	l := b.cfg.Limits
	if o.Limits != nil {
		l = o.Limits.Merge(l)
	}
	return l.DiskBytes
}

// diskFS is where the workspace's filesystem is mounted, hidden from its
// commands with the rest of the state directory. Its top holds diskRoot,
// bound on the workspace directory, and diskTmp, the commands' /tmp: both
// fill the one size, and neither is seen from the other.
func (b *Backend) diskFS(id string) string { return filepath.Join(b.disksDir(), id+".fs") }

const (
	diskRoot = "root"
	diskTmp  = "tmp"
)

// makeDisk gives the new workspace directory dir a filesystem of size
// bytes, dir (its root) with mode. A host that cannot is ErrInvalid: the
// caller asked for a limit that would not hold.
func (b *Backend) makeDisk(ctx context.Context, id, dir string, size int64, mode os.FileMode) error {
	const op = "local.Create"
	if err := b.diskProbe(); err != nil {
		return opsapi.E(op, id, opsapi.ErrInvalid, fmt.Errorf("options: limits.diskBytes: this host cannot give a workspace a filesystem of its own: %w", err))
	}
	top := b.diskFS(id)
	if err := os.Mkdir(top, 0o700); err != nil {
		return opsapi.E(op, id, nil, err)
	}
	if err := loopfs.Make(ctx, b.diskImage(id), top, size, 0, 0); err != nil {
		os.Remove(top)
		return opsapi.E(op, id, opsapi.ErrUnavailable, err)
	}
	err := os.Chmod(top, 0o700)
	if err == nil {
		err = os.Mkdir(filepath.Join(top, diskTmp), 0o700)
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(top, diskRoot), mode)
	}
	if err == nil {
		err = os.Chmod(filepath.Join(top, diskRoot), mode)
	}
	if err == nil {
		err = loopfs.Bind(filepath.Join(top, diskRoot), dir)
	}
	if err != nil {
		_ = b.dropDisk(context.WithoutCancel(ctx), id, dir)
		return opsapi.E(op, id, nil, err)
	}
	return nil
}

// mountDisk mounts the workspace's filesystem again where it is not (a
// reboot); the kernel keeps it mounted across a restart of the broker. A
// workspace made before its /tmp moved onto its filesystem has no diskFS:
// its filesystem is mounted on its directory itself.
func (b *Backend) mountDisk(id, dir string) error {
	ctx := context.Background()
	top := b.diskFS(id)
	if _, err := os.Stat(top); errors.Is(err, os.ErrNotExist) {
		return loopfs.Mount(ctx, b.diskImage(id), dir)
	}
	if err := loopfs.Mount(ctx, b.diskImage(id), top); err != nil {
		return err
	}
	return loopfs.Bind(filepath.Join(top, diskRoot), dir)
}

// dropDisk unmounts the workspace's directory and its filesystem, and
// deletes the image and the mount point.
func (b *Backend) dropDisk(ctx context.Context, id, dir string) error {
	if err := loopfs.Unmount(ctx, dir); err != nil {
		return err
	}
	top := b.diskFS(id)
	if _, err := os.Stat(top); errors.Is(err, os.ErrNotExist) {
		return loopfs.Remove(ctx, b.diskImage(id), dir)
	}
	if err := loopfs.Remove(ctx, b.diskImage(id), top); err != nil {
		return err
	}
	if err := os.Remove(top); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", top, err)
	}
	return nil
}

// closeDisks unmounts every workspace's filesystem, at Close: a stopped
// broker leaves no loop device behind, and its state directory can be
// removed. The workspaces with a disk it gave out let go of their
// directories first (their commands' confined thread, their open root),
// and refuse every call after (Workspace.rel); a filesystem a process
// still uses is detached, and goes when that process does. The next start mounts each again when it finds its workspace (mountDisk):
// mount(8) reuses the loop device of an image still attached, so a
// detached filesystem is never mounted twice.
func (b *Backend) closeDisks() {
	b.openedMu.Lock()
	opened := b.opened
	b.opened = nil
	b.openedMu.Unlock()
	for w := range opened {
		if w.disk == 0 {
			continue // nothing to unmount: it keeps working
		}
		w.mu.Lock()
		if w.sp != nil {
			w.sp.Close()
			w.sp = nil
		}
		w.mu.Unlock()
		w.fsroot.Close()
	}
	images, err := filepath.Glob(filepath.Join(b.disksDir(), "*.img"))
	if err != nil {
		b.logger.Warn("close: listing the workspaces' disks", "err", err)
	}
	ctx := context.Background()
	for _, img := range images {
		id := strings.TrimSuffix(filepath.Base(img), ".img")
		if !validID.MatchString(id) {
			continue
		}
		err := loopfs.Unmount(ctx, filepath.Join(b.dir, id))
		if top := b.diskFS(id); err == nil {
			if _, serr := os.Stat(top); serr == nil {
				err = loopfs.Unmount(ctx, top)
			}
		}
		if err != nil {
			b.logger.Warn("close: a workspace's disk stays mounted", "workspace", id, "err", err)
		}
	}
}

// removeDisk unmounts the workspace's filesystem and deletes its image.
func (w *Workspace) removeDisk() error {
	if w.disk == 0 {
		return nil
	}
	return w.b.dropDisk(context.Background(), w.id, w.root)
}

// Disk is opsapi.DiskLimiter's: the workspace's own filesystem.
func (w *Workspace) Disk() (opsapi.Disk, error) {
	if w.disk == 0 {
		return opsapi.Disk{}, nil
	}
	used, _, err := loopfs.Usage(w.root)
	if err != nil {
		return opsapi.Disk{}, opsapi.E("local.Disk", w.id, nil, err)
	}
	return opsapi.Disk{UsedBytes: used, LimitBytes: w.disk}, nil
}

// parseOptions decodes Create's options; unknown fields are errors.
func parseOptions(raw json.RawMessage) (createOptions, error) {
	var o createOptions
	if raw := bytes.TrimSpace(raw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return createOptions{}, err
		}
	}
	return o, nil
}

var (
	_ opsapi.DiskSizer   = (*Backend)(nil)
	_ opsapi.DiskLimiter = (*Workspace)(nil)
)
