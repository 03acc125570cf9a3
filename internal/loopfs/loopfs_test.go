//go:build linux

package loopfs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wsbroker/wsbroker/internal/loopfs"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestWritingPastTheSizeIsENOSPCAndDeletingWorks: the kernel holds the
// limit, whoever writes; a full filesystem still lets files go.
func TestWritingPastTheSizeIsENOSPCAndDeletingWorks(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	base := t.TempDir()
	img, dir := filepath.Join(base, "ws.img"), filepath.Join(base, "ws")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Make(ctx, img, dir, loopfs.MinSize, 1234, 1234); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopfs.Remove(ctx, img, dir) })

	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("a new filesystem holds %v, want nothing", entries)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil || st.Uid != 1234 || st.Gid != 1234 {
		t.Errorf("root owned by %d:%d (%v), want 1234:1234", st.Uid, st.Gid, err)
	}
	if ok, err := loopfs.Mounted(dir); !ok || err != nil {
		t.Fatalf("Mounted = %v, %v", ok, err)
	}

	big := filepath.Join(dir, "big")
	err := os.WriteFile(big, bytes.Repeat([]byte("x"), 2*loopfs.MinSize), 0o600)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing twice the size: %v, want ENOSPC", err)
	}
	used, size, err := loopfs.Usage(dir)
	if err != nil || size <= 0 || size > loopfs.MinSize || used < size*3/4 {
		t.Errorf("full: used %d of %d (%v)", used, size, err)
	}
	if err := os.Remove(big); err != nil {
		t.Fatalf("deleting on a full filesystem: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small"), []byte("ok"), 0o600); err != nil {
		t.Errorf("writing after the delete: %v", err)
	}

	// A second Mount of a mounted filesystem is a no-op (a restart).
	if err := loopfs.Mount(ctx, img, dir); err != nil {
		t.Errorf("Mount again: %v", err)
	}
	if err := loopfs.Remove(ctx, img, dir); err != nil {
		t.Fatal(err)
	}
	if ok, _ := loopfs.Mounted(dir); ok {
		t.Error("still mounted after Remove")
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image after Remove: %v", err)
	}
}

// TestMakeLeavesNothingBehindOnFailure: a size below the minimum, or a
// directory that is not there, leaves no image and no mount.
func TestMakeLeavesNothingBehindOnFailure(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	base := t.TempDir()
	img := filepath.Join(base, "ws.img")
	if err := loopfs.Make(ctx, img, base, loopfs.MinSize-1, 0, 0); err == nil {
		t.Error("a size below MinSize was accepted")
	}
	if err := loopfs.Make(ctx, img, filepath.Join(base, "missing"), loopfs.MinSize, 0, 0); err == nil {
		t.Error("a missing directory was accepted")
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image after failed Makes: %v", err)
	}
}

// TestBindSharesTheSize: a directory of the filesystem bound elsewhere
// shows only itself, but fills (and reports) the one size with its
// siblings; Unmount undoes the bind.
func TestBindSharesTheSize(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	base := t.TempDir()
	img, top, ws := filepath.Join(base, "ws.img"), filepath.Join(base, "top"), filepath.Join(base, "ws")
	for _, d := range []string{top, ws} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := loopfs.Make(ctx, img, top, loopfs.MinSize, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopfs.Unmount(ctx, ws); _ = loopfs.Remove(ctx, img, top) })
	for _, d := range []string{"root", "tmp"} {
		if err := os.Mkdir(filepath.Join(top, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := loopfs.Bind(filepath.Join(top, "root"), ws); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Bind(filepath.Join(top, "root"), ws); err != nil {
		t.Errorf("binding again on a bound directory: %v", err)
	}
	if ok, err := loopfs.Mounted(ws); !ok || err != nil {
		t.Fatalf("Mounted = %v, %v", ok, err)
	}
	before, _, _ := loopfs.Usage(ws)
	err := os.WriteFile(filepath.Join(top, "tmp", "big"), bytes.Repeat([]byte("x"), 2*loopfs.MinSize), 0o600)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("filling the sibling: %v, want ENOSPC", err)
	}
	if err := os.WriteFile(filepath.Join(ws, "f"), bytes.Repeat([]byte("x"), 1<<20), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing through the bind once the sibling filled the size: %v, want ENOSPC", err)
	}
	after, _, _ := loopfs.Usage(ws)
	if after-before < loopfs.MinSize/2 {
		t.Errorf("the bind reports %d bytes used, then %d: the sibling's files are not counted", before, after)
	}
	if entries, _ := os.ReadDir(ws); len(entries) > 1 {
		t.Errorf("the bind shows %v", entries)
	}
	if err := loopfs.Unmount(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if ok, _ := loopfs.Mounted(ws); ok {
		t.Error("still bound after Unmount")
	}
}
