//go:build linux

package loopfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/internal/procstart"
)

// MinSize is the smallest filesystem Make makes: below it ext4's own
// structures leave little room for files.
const MinSize = 8 << 20

// mountOptions are every workspace filesystem's: nothing on it runs as
// another user or reaches a device.
const mountOptions = "loop,nosuid,nodev,noatime"

// Make allocates an image of size bytes at image, makes an ext4
// filesystem on it whose root belongs to uid:gid, and mounts it on dir
// (which must exist). On failure nothing is left: no image, no mount.
func Make(ctx context.Context, image, dir string, size int64, uid, gid int) (err error) {
	if size < MinSize {
		return fmt.Errorf("loopfs: size %d is below the minimum of %d bytes", size, MinSize)
	}
	if err := allocate(image, size); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = Unmount(context.WithoutCancel(ctx), dir)
			os.Remove(image)
		}
	}()
	// -m 0: no blocks reserved for root (the limit is the workspace's);
	// -i 4096: an inode per 4 KiB, so many small files fit too.
	if err := run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-i", "4096",
		"-E", "root_owner="+strconv.Itoa(uid)+":"+strconv.Itoa(gid), image); err != nil {
		return err
	}
	if err := Mount(ctx, image, dir); err != nil {
		return err
	}
	// The workspace starts empty; fsck makes lost+found again if it needs
	// one.
	if err := os.Remove(filepath.Join(dir, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("loopfs: %w", err)
	}
	return nil
}

// allocate makes the image file with its whole size reserved, or with a
// hole where the filesystem it lives on cannot reserve space.
func allocate(image string, size int64) error {
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("loopfs: %w", err)
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(image)
		return fmt.Errorf("loopfs: allocating %d bytes for %s: %w", size, image, err)
	}
	return nil
}

// Mount mounts image on dir unless a filesystem is mounted there already
// (a restart of the broker; the kernel kept the mount).
func Mount(ctx context.Context, image, dir string) error {
	if ok, err := Mounted(dir); err != nil || ok {
		return err
	}
	return run(ctx, "mount", "-t", "ext4", "-o", mountOptions, image, dir)
}

// Bind mounts the directory src (inside a filesystem Make made) on dir,
// unless something is mounted there already (a restart of the broker).
// The bind keeps src's mount options (nosuid, nodev), and dir then
// reports the whole filesystem's use: a directory beside src on the same
// filesystem (a workspace's /tmp) fills the same size, unseen from dir.
// Unmount undoes it.
func Bind(src, dir string) error {
	if ok, err := Mounted(dir); err != nil || ok {
		return err
	}
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("loopfs: binding %s on %s: %w", src, dir, err)
	}
	return nil
}

// Unmount unmounts dir, if a filesystem is mounted there. A filesystem
// still busy (a process that held a file open survived the kill) is
// detached lazily: it goes when the last user does.
func Unmount(ctx context.Context, dir string) error {
	ok, err := Mounted(dir)
	if err != nil || !ok {
		return err
	}
	if err := run(ctx, "umount", dir); err == nil {
		return nil
	}
	return run(ctx, "umount", "-l", dir)
}

// Remove unmounts dir and deletes image.
func Remove(ctx context.Context, image, dir string) error {
	if err := Unmount(ctx, dir); err != nil {
		return err
	}
	if err := os.Remove(image); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("loopfs: %w", err)
	}
	return nil
}

// Mounted says whether dir is the root of a filesystem other than its
// parent's.
func Mounted(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, fmt.Errorf("loopfs: %w", &os.PathError{Op: "lstat", Path: dir, Err: err})
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("loopfs: %w", &os.PathError{Op: "lstat", Path: filepath.Dir(dir), Err: err})
	}
	return st.Dev != parent.Dev, nil
}

// Usage is the filesystem's use at dir: used bytes (files and ext4's own
// structures) and its size.
func Usage(dir string) (used, size int64, err error) {
	var s unix.Statfs_t
	if err := unix.Statfs(dir, &s); err != nil {
		return 0, 0, fmt.Errorf("loopfs: %w", &os.PathError{Op: "statfs", Path: dir, Err: err})
	}
	bs := int64(s.Bsize)
	return int64(s.Blocks-s.Bfree) * bs, int64(s.Blocks) * bs, nil
}

// Probe says why this host cannot give directories filesystems of their
// own, or nil when it can: it makes, mounts and removes one in scratch, a
// directory on the filesystem the images will live on. The answer is
// kept: the host does not change under a running broker.
func Probe(scratch string) error {
	probeOnce.Do(func() { probeErr = probe(scratch) })
	return probeErr
}

var (
	probeOnce sync.Once
	probeErr  error
)

func probe(scratch string) error {
	if os.Geteuid() != 0 {
		return errors.New("loop filesystems need root")
	}
	for _, prog := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Errorf("loop filesystems need %s: %w", prog, err)
		}
	}
	dir, err := os.MkdirTemp(scratch, ".loopfs-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return err
	}
	ctx := context.Background()
	if err := Make(ctx, filepath.Join(dir, "img"), mnt, MinSize, 0, 0); err != nil {
		return err
	}
	return Remove(ctx, filepath.Join(dir, "img"), mnt)
}

// run runs a program and turns its failure into an error that carries
// what it said.
func run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, prog, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := procstart.Run(cmd); err != nil {
		return fmt.Errorf("loopfs: %s %v: %w: %s", prog, args, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
