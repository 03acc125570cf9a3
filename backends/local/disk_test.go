package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/loopfs"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

const diskSize = 16 << 20

func diskOptions(size int64) json.RawMessage {
	return json.RawMessage(`{"limits":{"diskBytes":` + strings.TrimSpace(string(mustJSON(size))) + `}}`)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestDiskLimitIsTheKernels: past its size a workspace gets ENOSPC,
// whoever writes (a command, a write through the broker, a file deeper
// than PATH_MAX), deleting works on a full disk, its info says use and
// limit, and a restart (with the filesystem unmounted, as by a reboot)
// finds it limited still, files intact. Destroy leaves no mount or image.
func TestDiskLimitIsTheKernels(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	state := t.TempDir()
	b := newBackend(t, local.Config{StateDir: state})
	if got := b.DiskLimit(diskOptions(diskSize)); got != diskSize {
		t.Errorf("DiskLimit = %d, want %d", got, diskSize)
	}
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "d", Options: diskOptions(diskSize)})
	if err != nil {
		t.Fatal(err)
	}
	lw := ws.(*local.Workspace)
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_ = lw.Destroy(ctx)
		}
	})

	if out := sh(t, lw, "ls -A; echo kept > keep"); out != "" {
		t.Errorf("a new workspace lists %q, want nothing", out)
	}
	out := sh(t, lw, "head -c 32M /dev/zero > big; echo status $?")
	if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "status 1") {
		t.Errorf("writing 32 MiB into 16: %q", out)
	}
	if out := sh(t, lw, "rm big && echo removed"); out != "removed\n" {
		t.Errorf("rm on a full disk: %q", out)
	}
	// A file deeper than PATH_MAX is on the same filesystem.
	out = sh(t, lw, `n=$(printf 'd%.0s' {1..200}); for i in $(seq 25); do mkdir $n && cd $n 2>/dev/null || exit 1; done
		[ ${#PWD} -gt 4096 ] && echo deep; head -c 32M /dev/zero > f 2>/dev/null || echo full`)
	if out != "deep\nfull\n" {
		t.Errorf("deep write: %q", out)
	}
	sh(t, lw, "rm -rf d*")
	err = lw.WriteFile(ctx, "through-the-broker", bytes.NewReader(make([]byte, 2*diskSize)))
	if err == nil {
		t.Error("WriteFile of twice the size succeeded")
	}
	if _, err := lw.Stat(ctx, "through-the-broker"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("a failed WriteFile left the file behind: %v", err)
	}
	d, err := lw.Disk()
	if err != nil || d.LimitBytes != diskSize || d.UsedBytes <= 0 || d.UsedBytes > diskSize/2 {
		t.Errorf("Disk() = %+v, %v", d, err)
	}

	// A reboot: the broker stops and the mount is gone.
	root := ws.Root()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Unmount(ctx, root); err != nil {
		t.Fatal(err)
	}
	// The filesystem itself, beside the root's bind.
	if err := loopfs.Unmount(ctx, filepath.Join(state, "disks", "d.fs")); err != nil {
		t.Fatal(err)
	}
	b2 := newBackend(t, local.Config{StateDir: state})
	found, err := b2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lw = found["d"].(*local.Workspace)
	if got := readFile(t, lw, "keep"); got != "kept\n" {
		t.Errorf("after the restart: keep = %q", got)
	}
	if d, err := lw.Disk(); err != nil || d.LimitBytes != diskSize {
		t.Errorf("after the restart: Disk() = %+v, %v", d, err)
	}
	if out := sh(t, lw, "head -c 32M /dev/zero > big 2>/dev/null || echo full"); out != "full\n" {
		t.Errorf("after the restart, the limit does not hold: %q", out)
	}

	if err := lw.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	destroyed = true
	if ok, _ := loopfs.Mounted(root); ok {
		t.Error("still mounted after Destroy")
	}
	images, _ := filepath.Glob(filepath.Join(state, "disks", "*.img"))
	if len(images) != 0 {
		t.Errorf("images after Destroy: %v", images)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace directory after Destroy: %v", err)
	}
}

// TestDiskLimitOptionsAreChecked: a size below the minimum is refused,
// and one the host cannot hold is refused when asked for, while a
// configured default falls back to measuring (logged at start).
func TestDiskLimitOptionsAreChecked(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, local.Config{})
	_, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "small", Options: diskOptions(1 << 20)})
	if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), "diskBytes") {
		t.Errorf("1 MiB disk: %v, want ErrInvalid naming diskBytes", err)
	}

	defer local.NoLoopDevices()()
	b = newBackend(t, local.Config{})
	_, err = b.Create(ctx, opsapi.WorkspaceSpec{ID: "asked", Options: diskOptions(diskSize)})
	if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), "no loop devices") {
		t.Errorf("a disk the host cannot give: %v, want ErrInvalid with the reason", err)
	}
	cfg := local.Config{}
	cfg.Limits.DiskBytes = diskSize
	b = newBackend(t, cfg)
	if got := b.DiskLimit(nil); got != 0 {
		t.Errorf("DiskLimit after the fallback = %d, want 0", got)
	}
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "fallback"})
	if err != nil {
		t.Fatalf("create with the fallback: %v", err)
	}
	defer func() { _ = ws.(*local.Workspace).Destroy(ctx) }()
	if d, err := ws.(*local.Workspace).Disk(); err != nil || d.LimitBytes != 0 {
		t.Errorf("fallback workspace: Disk() = %+v, %v; want no limit", d, err)
	}
}

// TestDiskHoldsTheSandboxsTmp: a sandboxed workspace's /tmp lives on its
// own filesystem, beside its root but unseen from it: writing past the
// workspace's size into /tmp is ENOSPC, what /tmp holds counts in the
// workspace's use, nothing of it lands on the state directory's
// filesystem, and Destroy leaves nothing.
func TestDiskHoldsTheSandboxsTmp(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	state := t.TempDir()
	b := newBackend(t, local.Config{StateDir: state, Sandbox: local.SandboxConfig{Mode: "on"}})
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "t", Options: diskOptions(diskSize)})
	if err != nil {
		t.Fatal(err)
	}
	lw := ws.(*local.Workspace)
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_ = lw.Destroy(ctx)
		}
	})
	out := sh(t, lw, "head -c 32M /dev/zero > /tmp/big; echo status $?; ls -A")
	if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "status 1") {
		t.Errorf("writing 32 MiB into the /tmp of a 16 MiB workspace: %q", out)
	}
	if strings.Contains(out, "tmp") {
		t.Errorf("the workspace's root shows its /tmp: %q", out)
	}
	sh(t, lw, "rm -f /tmp/big")
	before, err := lw.Disk()
	if err != nil {
		t.Fatal(err)
	}
	sh(t, lw, "head -c 4M /dev/urandom > /tmp/four && sync")
	after, err := lw.Disk()
	if err != nil {
		t.Fatal(err)
	}
	if after.UsedBytes-before.UsedBytes < 3<<20 {
		t.Errorf("4 MiB in /tmp: the workspace's use went from %d to %d", before.UsedBytes, after.UsedBytes)
	}
	var onState int64
	_ = filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasSuffix(p, ".img") {
			return nil
		}
		if fi, err := d.Info(); err == nil && loopfsDev(t, p) == loopfsDev(t, state) {
			onState += fi.Size()
		}
		return nil
	})
	if onState > 1<<20 {
		t.Errorf("%d bytes of the workspace's files are on the state directory's filesystem", onState)
	}
	if err := lw.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	destroyed = true
	left, _ := filepath.Glob(filepath.Join(state, "disks", "*"))
	tmps, _ := filepath.Glob(filepath.Join(state, "tmp", "*"))
	if len(left)+len(tmps) != 0 {
		t.Errorf("after Destroy: %v %v", left, tmps)
	}
}

// loopfsDev is the device p is on.
func loopfsDev(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev) //nolint:unconvert // an int32 on darwin, which `make cross` vets
}

// TestNoDiskLimitIsWarned: a backend without a disk size says at start
// that its workspaces can fill the state directory's filesystem, and
// whether this host could hold a size; one whose size the host cannot
// hold says so too.
func TestNoDiskLimitIsWarned(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := local.New(local.Config{StateDir: t.TempDir()}, logger); err != nil {
		t.Fatal(err)
	}
	want := "this host can hold one"
	if loopfs.Probe(t.TempDir()) != nil {
		want = "this host cannot hold one"
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "disk limits off") || !strings.Contains(out, want) {
		t.Errorf("start without a disk size logged %q, want a warning saying %q", out, want)
	}

	defer local.NoLoopDevices()()
	logs = &testutil.LockedBuffer{}
	cfg := local.Config{StateDir: t.TempDir()}
	cfg.Limits.DiskBytes = diskSize
	if _, err := local.New(cfg, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "disk limits not enforced") || !strings.Contains(out, "no loop devices") {
		t.Errorf("start with a size the host cannot hold logged %q", out)
	}
}

// TestDiskOfTheOldLayoutStillMounts: a workspace made before its /tmp
// moved onto its filesystem (the image mounted on its directory itself)
// is found again after a reboot, still limited, and Destroy removes it.
func TestDiskOfTheOldLayoutStillMounts(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	state := t.TempDir()
	dir, img := filepath.Join(state, "workspaces", "old"), filepath.Join(state, "disks", "old.img")
	for _, d := range []string{dir, filepath.Dir(img), filepath.Join(state, "limits")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := loopfs.Make(ctx, img, dir, diskSize, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopfs.Remove(ctx, img, dir) })
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "limits", "old.json"), mustJSON(map[string]int64{"diskBytes": diskSize}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Unmount(ctx, dir); err != nil { // a reboot
		t.Fatal(err)
	}
	found, err := newBackend(t, local.Config{StateDir: state}).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lw, ok := found["old"].(*local.Workspace)
	if !ok {
		t.Fatalf("List found %v", found)
	}
	if got := readFile(t, lw, "keep"); got != "kept\n" {
		t.Errorf("keep = %q", got)
	}
	if d, err := lw.Disk(); err != nil || d.LimitBytes != diskSize {
		t.Errorf("Disk() = %+v, %v", d, err)
	}
	if err := lw.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := loopfs.Mounted(dir); ok {
		t.Error("still mounted after Destroy")
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image after Destroy: %v", err)
	}
}

// loopsOf lists the loop devices whose backing file is image (deleted or
// not).
func loopsOf(t *testing.T, image string) []string {
	t.Helper()
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var loops []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == image {
			loops = append(loops, filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return loops
}

// TestCloseUnmountsTheDisks: a workspace gets the default size when none
// is configured; Close unmounts its filesystem and frees its loop device
// (a stopped broker's state directory can be removed), and a new backend
// on the same state directory finds it with its files and its limit (its
// image's size, even with its saved limits unreadable and another default
// configured). Destroy frees the loop device too.
func TestCloseUnmountsTheDisks(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	state := t.TempDir()
	cfg := local.Config{StateDir: state, DefaultDiskBytes: diskSize}
	b := newBackend(t, cfg)
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	lw := ws.(*local.Workspace)
	t.Cleanup(func() { _ = lw.Destroy(ctx) })
	if d, err := lw.Disk(); err != nil || d.LimitBytes != diskSize {
		t.Fatalf("a workspace with no size asked for: Disk() = %+v, %v; want the default, %d", d, err, diskSize)
	}
	if out := sh(t, lw, "echo kept > keep; echo tmp > /tmp/t; cat /tmp/t"); out != "tmp\n" {
		t.Fatalf("writing: %q", out)
	}
	root, top, image := ws.Root(), filepath.Join(state, "disks", "c.fs"), filepath.Join(state, "disks", "c.img")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, top} {
		if ok, err := loopfs.Mounted(dir); ok || err != nil {
			t.Errorf("%s still mounted after Close (%v)", dir, err)
		}
	}
	// The kernel lets go of an autoclear loop device after the last
	// unmount in a work queue (Linux 5.17+), not within umount(2).
	eventually(t, "the loop device freed after Close", func() bool { return len(loopsOf(t, image)) == 0 })
	if _, err := lw.Stat(ctx, "keep"); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Errorf("Stat in a workspace of a closed backend: %v, want ErrUnavailable", err)
	}

	// Its saved limits lost, and another default size configured: the
	// workspace's disk is its image's size still.
	if err := os.WriteFile(filepath.Join(state, "limits", "c.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.DefaultDiskBytes = 2 * diskSize
	b2 := newBackend(t, cfg)
	t.Cleanup(func() { _ = b2.Close() })
	found, err := b2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lw = found["c"].(*local.Workspace)
	if got := readFile(t, lw, "keep"); got != "kept\n" {
		t.Errorf("after Close and a new start: keep = %q", got)
	}
	if d, err := lw.Disk(); err != nil || d.LimitBytes != diskSize {
		t.Errorf("after Close and a new start: Disk() = %+v, %v", d, err)
	}
	if out := sh(t, lw, "head -c 32M /dev/zero > big 2>/dev/null || echo full"); out != "full\n" {
		t.Errorf("after Close and a new start, the limit does not hold: %q", out)
	}
	if err := lw.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	// The kernel lets go of an autoclear loop device after the last
	// unmount in a work queue (Linux 5.17+), not within umount(2).
	eventually(t, "the loop device freed after Destroy", func() bool { return len(loopsOf(t, image)) == 0 })
}

// TestDefaultDiskOffIsWarned: the default size is dropped, with a
// warning that says it is the default, where the host cannot hold it
// (creates still work, without a disk); -1 turns it off, warned too.
func TestDefaultDiskOffIsWarned(t *testing.T) {
	ctx := context.Background()
	check := func(cfg local.Config, want string) {
		t.Helper()
		logs := &testutil.LockedBuffer{}
		b, err := local.New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, want) {
			t.Errorf("start logged %q, want a warning saying %q", out, want)
		}
		if got := b.DiskLimit(nil); got != 0 {
			t.Errorf("DiskLimit = %d, want none", got)
		}
		ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "w"})
		if err != nil {
			t.Fatal(err)
		}
		lw := ws.(*local.Workspace)
		defer func() { _ = lw.Destroy(ctx) }()
		if d, err := lw.Disk(); err != nil || d.LimitBytes != 0 {
			t.Errorf("Disk() = %+v, %v; want none", d, err)
		}
	}
	off := local.Config{StateDir: t.TempDir(), DefaultDiskBytes: diskSize}
	off.Limits.DiskBytes = -1
	check(off, "disk limits off (local.limits.diskBytes: -1)")

	defer local.NoLoopDevices()()
	check(local.Config{StateDir: t.TempDir(), DefaultDiskBytes: diskSize},
		"this host cannot give a workspace a filesystem of its own of the default size")
}

// TestWorkspaceWithoutSavedLimitsHasNoDisk: a workspace made with no
// limits at all (nothing saved) is found again by a backend with a
// default size, still without a disk of its own.
func TestWorkspaceWithoutSavedLimitsHasNoDisk(t *testing.T) {
	testutil.RequireLoopDevices(t)
	ctx := context.Background()
	state := t.TempDir()
	old := local.Config{StateDir: state, Cgroups: "off"}
	old.Sandbox.Mode = "off"
	ws, err := newBackend(t, old).Create(ctx, opsapi.WorkspaceSpec{ID: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Root(), "keep"), []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withDefault := old
	withDefault.DefaultDiskBytes = diskSize
	found, err := newBackend(t, withDefault).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lw, ok := found["plain"].(*local.Workspace)
	if !ok {
		t.Fatalf("List found %v", found)
	}
	t.Cleanup(func() { _ = lw.Destroy(ctx) })
	if got := readFile(t, lw, "keep"); got != "kept\n" {
		t.Errorf("keep = %q", got)
	}
	if d, err := lw.Disk(); err != nil || d.LimitBytes != 0 {
		t.Errorf("Disk() = %+v, %v; want none", d, err)
	}
}
