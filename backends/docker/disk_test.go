package docker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/internal/loopfs"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestVolumeDiskIsTheKernels: a workspace volume with limits.disk is a
// filesystem of that size: past it the container's user gets ENOSPC
// (through the agent and through a write), rm works on a full disk, the
// image's workspace directory was copied in with its owner, Disk() says
// use and limit, and Destroy leaves no mount, image or directory.
func TestVolumeDiskIsTheKernels(t *testing.T) {
	testutil.RequireLoopDevices(t)
	disks := t.TempDir()
	b := newBackend(t, func(c *docker.Config) { c.DiskDir = disks })
	const size = 16 << 20
	opts := map[string]any{"limits": map[string]any{"disk": "16MiB"}}
	ws := create(t, b, opts)

	if got := sh(t, ws, "stat -c %U $PWD; df -k . | tail -1 | awk '{print $2 <= 16384}'"); got != "agent\n1\n" {
		t.Errorf("owner of the workspace and its size: %q", got)
	}
	if got := sh(t, ws, "head -c 32M /dev/zero > big 2>&1; echo $?"); got != "1\n" {
		t.Errorf("writing 32 MiB into 16: %q", got)
	}
	if got := sh(t, ws, "rm big && echo removed"); got != "removed\n" {
		t.Errorf("rm on a full disk: %q", got)
	}
	ctx := context.Background()
	if err := ws.WriteFile(ctx, "through-the-broker", bytes.NewReader(make([]byte, 2*size))); err == nil {
		t.Error("WriteFile of twice the size succeeded")
	}
	if _, err := ws.Stat(ctx, "through-the-broker"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("a failed WriteFile left the file behind: %v", err)
	}
	d, err := ws.Disk()
	if err != nil || d.LimitBytes != size || d.UsedBytes <= 0 || d.UsedBytes > size/2 {
		t.Errorf("Disk() = %+v, %v", d, err)
	}

	if err := ws.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("findmnt", "-rn", "-o", "TARGET").Output(); strings.Contains(string(out), disks) {
		t.Errorf("still mounted after Destroy:\n%s", out)
	}
	left, _ := os.ReadDir(disks)
	for _, e := range left {
		if !strings.HasPrefix(e.Name(), ".loopfs-probe") {
			t.Errorf("left in the disk directory after Destroy: %s", e.Name())
		}
	}
}

// TestVolumeDiskOptionsAreChecked: a size below 8 MiB or above the
// configured one is ErrInvalid; one the host cannot hold is refused when
// asked for, while a configured size falls back to none.
func TestVolumeDiskOptionsAreChecked(t *testing.T) {
	testutil.RequireLoopDevices(t)
	b := newBackend(t, func(c *docker.Config) { c.DiskDir = t.TempDir(); c.Disk = 32 << 20 })
	for _, disk := range []string{"1MiB", "64MiB"} {
		_, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Options: []byte(`{"limits":{"disk":"` + disk + `"}}`)})
		if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), "limits.disk") {
			t.Errorf("disk %s with 32 MiB configured: %v, want ErrInvalid naming limits.disk", disk, err)
		}
	}
	if got := b.DiskLimit([]byte(`{"limits":{"disk":"16MiB"}}`)); got != 16<<20 {
		t.Errorf("DiskLimit = %d", got)
	}

	defer docker.NoLoopDevices()()
	b = newBackend(t, func(c *docker.Config) { c.DiskDir = t.TempDir() })
	_, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Options: []byte(`{"limits":{"disk":"16MiB"}}`)})
	if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), "no loop devices") {
		t.Errorf("a disk the host cannot give: %v, want ErrInvalid with the reason", err)
	}
	b = newBackend(t, func(c *docker.Config) { c.DiskDir = t.TempDir(); c.Disk = 32 << 20 })
	if got := b.DiskLimit(nil); got != 0 {
		t.Errorf("DiskLimit after the fallback = %d, want 0", got)
	}
	if d, err := create(t, b, nil).Disk(); err != nil || d.LimitBytes != 0 {
		t.Errorf("fallback workspace: Disk() = %+v, %v; want no limit", d, err)
	}
}

// TestVolumeDiskAfterAReboot: the engine restarts a container at boot
// before the broker has mounted its filesystem again; List mounts it and
// restarts the container, so the workspace has its files and its limit.
func TestVolumeDiskAfterAReboot(t *testing.T) {
	testutil.RequireLoopDevices(t)
	disks := t.TempDir()
	b1 := newBackend(t, func(c *docker.Config) { c.DiskDir = disks })
	ws := create(t, b1, map[string]any{"limits": map[string]any{"disk": "16MiB"}})
	if err := ws.WriteFile(t.Context(), "kept.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	b1.Close()
	if out, err := dockerCLI(t, "stop", "-t", "0", ws.ContainerID()); err != nil {
		t.Fatal(out)
	}
	if err := loopfs.Unmount(context.Background(), filepath.Join(disks, ws.ID())); err != nil {
		t.Fatal(err)
	}
	if out, err := dockerCLI(t, "start", ws.ContainerID()); err != nil {
		t.Fatal(out)
	}

	b2 := newBackend(t, func(c *docker.Config) { c.DiskDir = disks })
	found, err := b2.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := found[ws.ID()].(*docker.Workspace)
	if !ok {
		t.Fatalf("List did not find %s", ws.ID())
	}
	if out := sh(t, got, "cat kept.txt; head -c 32M /dev/zero > big 2>/dev/null || echo full"); out != "keptfull\n" {
		t.Errorf("after the reboot: %q", out)
	}
	if d, err := got.Disk(); err != nil || d.LimitBytes != 16<<20 {
		t.Errorf("after the reboot: Disk() = %+v, %v", d, err)
	}
}

// loggedBackend is newBackend with its log in logs.
func loggedBackend(t *testing.T, logs *testutil.LockedBuffer, opts ...func(*docker.Config)) *docker.Backend {
	t.Helper()
	testutil.RequireDocker(t)
	testutil.RequireImage(t, testImage)
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.AgentBinary = sftpBinary
	for _, o := range opts {
		o(&cfg)
	}
	b, err := docker.New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestVolumesAreBoundedByDefault (issue 37, finding 10): with no disk
// configured, a host that can give volumes filesystems of their own
// gives each one of DefaultDisk, so a workspace cannot fill the engine's
// disk; where it cannot, or with disk -1, the start says the volumes are
// unbounded.
func TestVolumesAreBoundedByDefault(t *testing.T) {
	testutil.RequireLoopDevices(t)
	var logs testutil.LockedBuffer
	b := loggedBackend(t, &logs, func(c *docker.Config) { c.DiskDir = t.TempDir() })
	ws := create(t, b, nil)
	if d, err := ws.Disk(); err != nil || d.LimitBytes != int64(docker.DefaultDisk) {
		t.Errorf("Disk() with no disk configured = %+v, %v; want a limit of %d", d, err, int64(docker.DefaultDisk))
	}
	if got := sh(t, ws, "df -k . | tail -1 | awk '{print $2 <= 1048576}'"); got != "1\n" {
		t.Errorf("the workspace's filesystem is larger than the default: %q", got)
	}
	if got := b.DiskLimit(nil); got != int64(docker.DefaultDisk) {
		t.Errorf("DiskLimit = %d, want the default", got)
	}
	if strings.Contains(logs.String(), "unbounded") {
		t.Errorf("a warning of unbounded volumes where they are bounded:\n%s", logs.String())
	}

	var noneLogs testutil.LockedBuffer
	b = loggedBackend(t, &noneLogs, func(c *docker.Config) { c.DiskDir = t.TempDir(); c.Disk = -1 })
	if got := b.DiskLimit(nil); got != 0 || !strings.Contains(noneLogs.String(), "workspace volumes are unbounded") {
		t.Errorf("disk -1: DiskLimit %d, log:\n%s", got, noneLogs.String())
	}

	defer docker.NoLoopDevices()()
	var cannotLogs testutil.LockedBuffer
	b = loggedBackend(t, &cannotLogs, func(c *docker.Config) { c.DiskDir = t.TempDir() })
	if got := b.DiskLimit(nil); got != 0 {
		t.Errorf("DiskLimit on a host that cannot = %d, want 0", got)
	}
	if log := cannotLogs.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "workspace volumes are unbounded") ||
		!strings.Contains(log, "no loop devices") {
		t.Errorf("no clear warning at start on a host that cannot bound volumes:\n%s", log)
	}
}
