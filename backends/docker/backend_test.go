package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/agent"
)

// inspect is the part of `docker inspect` the tests look at.
type inspect struct {
	State struct {
		Running bool
	}
	Config struct {
		User   string
		Labels map[string]string
	}
	HostConfig struct {
		CapDrop        []string
		CapAdd         []string
		SecurityOpt    []string
		ReadonlyRootfs bool
		NetworkMode    string
		PidsLimit      int64
		Memory         int64
		MemorySwap     int64
		NanoCpus       int64
		Init           bool
		Tmpfs          map[string]string
	}
	Mounts []struct {
		Type, Name, Source, Destination string
		RW                              bool
	}
}

// inspectContainer asks the docker CLI, not the backend, about id.
func inspectContainer(t *testing.T, id string) inspect {
	t.Helper()
	out, err := dockerCLI(t, "container", "inspect", id)
	if err != nil {
		t.Fatalf("docker inspect %s: %v: %s", id, err, out)
	}
	var got []inspect
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("docker inspect output: %v", err)
	}
	return got[0]
}

// TestSecureDefaults checks the container as the engine reports it and as
// a command inside sees it.
func TestSecureDefaults(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	c := inspectContainer(t, ws.ContainerID())
	h := c.HostConfig
	switch {
	case c.Config.User != "1000:1000":
		t.Errorf("user = %q", c.Config.User)
	case !slices.Equal(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0:
		t.Errorf("caps: drop %v add %v", h.CapDrop, h.CapAdd)
	case !slices.Contains(h.SecurityOpt, "no-new-privileges:true"):
		t.Errorf("security options %v lack no-new-privileges", h.SecurityOpt)
	case slices.ContainsFunc(h.SecurityOpt, func(s string) bool { return strings.HasPrefix(s, "seccomp") }):
		t.Errorf("security options %v change the default seccomp profile", h.SecurityOpt)
	case !h.ReadonlyRootfs:
		t.Error("root filesystem is writable")
	case h.NetworkMode != "none":
		t.Errorf("network mode %q", h.NetworkMode)
	case h.PidsLimit != docker.DefaultPids:
		t.Errorf("pids limit %d", h.PidsLimit)
	case h.Memory != int64(remote.DefaultMemory) || h.MemorySwap != h.Memory:
		t.Errorf("memory %d, memory+swap %d", h.Memory, h.MemorySwap)
	case h.NanoCpus != int64(remote.DefaultCPUs*1e9):
		t.Errorf("nano cpus %d", h.NanoCpus)
	case !h.Init:
		t.Error("no init process")
	case !strings.Contains(h.Tmpfs["/tmp"], "size="+strconv.Itoa(int(remote.DefaultTmpfsSize))):
		t.Errorf("tmpfs %v", h.Tmpfs)
	case c.Config.Labels[docker.LabelManaged] != "1" || c.Config.Labels[docker.LabelWorkspace] != ws.ID():
		t.Errorf("labels %v", c.Config.Labels)
	}
	var sawVolume bool
	for _, m := range c.Mounts {
		if m.Destination == "/workspace" && m.Type == "volume" && m.RW {
			sawVolume = true
		}
		if m.Destination == docker.AgentRunDir && (m.RW || m.Type != "bind") {
			t.Errorf("the agent's run directory mount is %+v, want read-only bind", m)
		}
		if m.Destination == docker.InjectedSFTPServer && (m.RW || m.Type != "bind") {
			t.Errorf("injected sftp server mount is %+v, want read-only bind", m)
		}
	}
	if !sawVolume {
		t.Errorf("no writable volume at /workspace: %+v", c.Mounts)
	}

	// From inside: no capabilities, no new privileges, a seccomp filter,
	// uid 1000, docker-init as PID 1, only loopback, the pids limit.
	status := sh(t, ws, `grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status`)
	for _, want := range []string{"Uid:\t1000\t1000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q:\n%s", want, status)
		}
	}
	if got := sh(t, ws, "cat /proc/1/comm"); got != "docker-init\n" {
		t.Errorf("PID 1 is %q", got)
	}
	if got := sh(t, ws, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`); got != "lo\n" {
		t.Errorf("network interfaces: %q", got)
	}
	if got := sh(t, ws, `cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max`); got != "4096\n" {
		t.Errorf("pids.max = %q", got)
	}
	got := sh(t, ws, `touch /rootfs-test 2>&1 || echo refused; touch /tmp/ok && echo tmp-ok; touch "$HOME/.ok" && echo home-ok`)
	if !strings.Contains(got, "Read-only file system") || !strings.Contains(got, "tmp-ok") || !strings.Contains(got, "home-ok") {
		t.Errorf("write to /, /tmp and $HOME: %q", got)
	}
}

// TestCreateOptions: lowered limits reach the container; bad options,
// unknown images and duplicate IDs are refused with the contract's kinds.
func TestCreateOptions(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, map[string]any{"limits": map[string]any{"memory": "256MiB", "cpus": 0.5, "pids": 100}, "network": "none"})
	h := inspectContainer(t, ws.ContainerID()).HostConfig
	if h.Memory != 256<<20 || h.NanoCpus != 5e8 || h.PidsLimit != 100 {
		t.Errorf("limits not applied: memory %d, nano cpus %d, pids %d", h.Memory, h.NanoCpus, h.PidsLimit)
	}
	for _, c := range []struct {
		opts string
		kind error
	}{
		{`{"imagee":"x"}`, opsapi.ErrInvalid},
		{`{"limits":{"memory":"1TiB"}}`, opsapi.ErrInvalid},
		{`{"network":"host"}`, opsapi.ErrInvalid},
		{`{"image":"busybox:latest"}`, opsapi.ErrInvalid},
		{`[]`, opsapi.ErrInvalid},
	} {
		_, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Options: json.RawMessage(c.opts)})
		if !errors.Is(err, c.kind) {
			t.Errorf("options %s: %v, want %v", c.opts, err, c.kind)
		}
	}
	missing := newBackend(t, func(c *docker.Config) { c.AllowedImages = []string{"*"} })
	_, err := missing.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Options: json.RawMessage(`{"image":"wsbroker/no-such-image:1"}`)})
	if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), "never pulled") {
		t.Errorf("missing image: %v", err)
	}
	if _, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: ws.ID()}); !errors.Is(err, opsapi.ErrExist) {
		t.Errorf("duplicate id: %v, want ErrExist", err)
	}
	// A volume left behind under the name a new workspace would use is
	// never handed to it.
	leftover := newID(t)
	if out, err := dockerCLI(t, "volume", "create", "wsbroker-"+leftover); err != nil {
		t.Fatal(out)
	}
	t.Cleanup(func() {
		if out, err := dockerCLI(t, "volume", "rm", "wsbroker-"+leftover); err != nil {
			t.Errorf("removing the leftover volume: %s", out)
		}
	})
	if _, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: leftover}); !errors.Is(err, opsapi.ErrExist) {
		t.Errorf("id of a leftover volume: %v, want ErrExist", err)
	}
	if _, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "../x"}); !errors.Is(err, opsapi.ErrInvalid) {
		t.Errorf("bad id: %v, want ErrInvalid", err)
	}
}

// TestRediscoveryAfterRestart: a second backend (a restarted broker) finds
// the workspaces by their labels, with their files and creation time, and
// starts a container that was stopped meanwhile. The workspace keeps the
// root it was made with, though the configuration changed.
func TestRediscoveryAfterRestart(t *testing.T) {
	b1 := newBackend(t)
	ws := create(t, b1, nil)
	stopped := create(t, b1, nil)
	if err := ws.WriteFile(t.Context(), "kept.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	b1.Close()
	if out, err := dockerCLI(t, "stop", "-t", "0", stopped.ContainerID()); err != nil {
		t.Fatal(out)
	}

	b2 := newBackend(t, func(c *docker.Config) { c.WorkspaceDir = "/data" })
	found, err := b2.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := found[ws.ID()].(*docker.Workspace)
	if !ok {
		t.Fatalf("List did not find %s (found %d)", ws.ID(), len(found))
	}
	if !got.CreatedAt().Equal(ws.CreatedAt()) || got.Root() != "/workspace" || got.ContainerID() != ws.ContainerID() {
		t.Errorf("rediscovered %s: created %v root %q, want %v /workspace", got.ID(), got.CreatedAt(), got.Root(), ws.CreatedAt())
	}
	if out := sh(t, got, "cat kept.txt"); out != "kept" {
		t.Errorf("file after restart: %q", out)
	}
	if _, ok := found[stopped.ID()]; !ok {
		t.Fatalf("List did not find the stopped workspace %s", stopped.ID())
	}
	if !inspectContainer(t, stopped.ContainerID()).State.Running {
		t.Error("List did not start the stopped container")
	}
	if out := sh(t, found[stopped.ID()].(opsapi.BashOperations), "echo back"); out != "back\n" {
		t.Errorf("stopped workspace after List: %q", out)
	}
	again, err := b2.List(t.Context())
	if err != nil || again[ws.ID()] != found[ws.ID()] {
		t.Errorf("a second List gave another object for the same workspace (%v)", err)
	}
}

// TestDestroyRemovesContainerAndVolume, as the engine sees it.
func TestDestroyRemovesContainerAndVolume(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	sh(t, ws, "sleep 600 >/dev/null 2>&1 &")
	if err := ws.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if out, err := dockerCLI(t, "container", "inspect", ws.ContainerID()); err == nil {
		t.Errorf("container still exists: %s", out)
	}
	if out, err := dockerCLI(t, "volume", "inspect", "wsbroker-"+ws.ID()); err == nil {
		t.Errorf("volume still exists: %s", out)
	}
	if _, err := ws.Stat(t.Context(), "."); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("Stat after Destroy: %v, want ErrNotExist", err)
	}
	if _, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true"}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("Exec after Destroy: %v, want ErrNotExist", err)
	}
	if err := ws.Destroy(t.Context()); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	found, err := b.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := found[ws.ID()]; ok {
		t.Error("List still finds the destroyed workspace")
	}
}

// TestIdleTTLExpiry: an idle workspace is removed by the reaper; one
// running a command is not, however long the command takes.
func TestIdleTTLExpiry(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	b := newBackend(t, func(c *docker.Config) { c.IdleTTL = ttl })
	idle := create(t, b, nil)
	busy := create(t, b, nil)
	res, err := busy.Exec(t.Context(), opsapi.ExecRequest{Command: "sleep 4"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("a command longer than the TTL: %+v, %v", res, err)
	}
	if _, err := busy.Stat(t.Context(), "."); err != nil {
		t.Fatalf("the busy workspace expired under its command: %v", err)
	}
	gone := func(ws *docker.Workspace) bool {
		_, err := dockerCLI(t, "container", "inspect", ws.ContainerID())
		return err != nil
	}
	if !eventually(20*time.Second, func() bool { return gone(idle) && gone(busy) }) {
		t.Fatal("idle workspaces still exist 20s after their TTL")
	}
	if out, err := dockerCLI(t, "volume", "inspect", "wsbroker-"+idle.ID()); err == nil {
		t.Errorf("volume of the expired workspace still exists: %s", out)
	}
	_, err = idle.Stat(t.Context(), ".")
	if !errors.Is(err, opsapi.ErrNotExist) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Stat after expiry: %v, want ErrNotExist saying expired", err)
	}
}

// TestUnreadableFileIsErrPermission: the container's user (not root) gets
// ErrPermission for a file it may not read, small (which the injected
// server would otherwise send with its stat) or large, with either server.
func TestUnreadableFileIsErrPermission(t *testing.T) {
	for _, mode := range []string{docker.SFTPImage, docker.SFTPInject} {
		t.Run(mode, func(t *testing.T) {
			b := newBackend(t, func(c *docker.Config) { c.SFTPServer = mode })
			ws := create(t, b, nil)
			sh(t, ws, "echo secret > small && head -c 200000 /dev/zero > large && chmod 000 small large")
			for _, name := range []string{"small", "large"} {
				rc, err := ws.Open(t.Context(), name)
				if err == nil {
					rc.Close()
				}
				if !errors.Is(err, opsapi.ErrPermission) {
					t.Errorf("Open(%s) = %v, want ErrPermission", name, err)
				}
			}
		})
	}
}

// TestProcWorkdirRejected: the CVE-2024-21626 shape, named directly,
// relatively or through a link, never runs.
// Links are resolved by both kinds of server (OpenSSH's realpath, and
// lstat/readlink over pkg/sftp's).
func TestProcWorkdirRejected(t *testing.T) {
	for _, mode := range []string{docker.SFTPImage, docker.SFTPInject} {
		t.Run(mode, func(t *testing.T) { testProcWorkdir(t, mode) })
	}
}

func testProcWorkdir(t *testing.T, mode string) {
	b := newBackend(t, func(c *docker.Config) { c.SFTPServer = mode })
	ws := create(t, b, nil)
	sh(t, ws, "ln -s /proc/self/fd fdlink && mkdir real")
	// fdlink/N names fd N of whichever process resolves it: the file
	// server's when checked (fd 0 to 2 may be /dev/null there, and fd 7
	// was /dev/null for a moment while the agent started a reaper), the
	// shell's when the command runs. A cwd through /proc is refused
	// whatever it resolves to at the check.
	for _, cwd := range []string{"/proc/self/fd/7", "/proc", "../proc/self/cwd", "/workspace/../proc/1/cwd", "fdlink", "fdlink/7", "fdlink/0", "fdlink/1", "fdlink/2"} {
		_, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "touch /workspace/ran", Cwd: cwd})
		if !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Cwd %q: %v, want ErrPermission", cwd, err)
		}
	}
	if _, err := ws.Stat(t.Context(), "ran"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("a refused command ran (%v)", err)
	}
	if out := sh(t, ws, "ls -d /proc/self/fd >/dev/null && echo ok"); out != "ok\n" {
		t.Errorf("commands may still look at /proc: %q", out)
	}
	var out strings.Builder
	if _, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "pwd", Cwd: "real", Output: &out}); err != nil || out.String() != "/workspace/real\n" {
		t.Errorf("an ordinary Cwd: %q, %v", out.String(), err)
	}
}

// serverPid finds the SFTP server's pid from inside the container: the
// agent's, not one of its reapers (the same binary).
func serverPid(t *testing.T, ws *docker.Workspace, name string) string {
	t.Helper()
	out, _ := dockerCLI(t, "exec", ws.ContainerID(), "pgrep", "-af", name)
	var pids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if pid, cmd, ok := strings.Cut(line, " "); ok && !strings.HasSuffix(cmd, " "+agent.ReapMode) {
			pids = append(pids, pid)
		}
	}
	return strings.Join(pids, " ")
}

// TestSFTPChannelReconnect: the server killed inside the container, the
// next operations work on a new channel.
func TestSFTPChannelReconnect(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	if err := ws.WriteFile(t.Context(), "a.txt", strings.NewReader("one")); err != nil {
		t.Fatal(err)
	}
	first := serverPid(t, ws, "sftp-server")
	if first == "" {
		t.Fatal("no sftp server running in the container")
	}
	if out, err := dockerCLI(t, "exec", ws.ContainerID(), "kill", "-KILL", first); err != nil {
		t.Fatalf("kill: %v: %s", err, out)
	}
	fi, err := ws.Stat(t.Context(), "a.txt")
	if err != nil || fi.Size != 3 {
		t.Fatalf("Stat after the server died: %+v, %v", fi, err)
	}
	if err := ws.WriteFile(t.Context(), "a.txt", strings.NewReader("two")); err != nil {
		t.Fatalf("WriteFile after the server died: %v", err)
	}
	if got := readAll(t, ws, "a.txt"); got != "two" {
		t.Errorf("content %q", got)
	}
	if second := serverPid(t, ws, "sftp-server"); second == "" || second == first {
		t.Errorf("server pid before %q, after %q: want a new server", first, second)
	}
}

func readAll(t *testing.T, ws opsapi.ReadOperations, p string) string {
	t.Helper()
	rc, err := ws.Open(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noSFTPImage derives an image with no sftp-server from the workspace
// image (removed as root in a throwaway container, then committed) and
// removes it when the test ends. The image keeps that container's
// entrypoint, rm: the backend must replace an image's entrypoint.
func noSFTPImage(t *testing.T) string {
	t.Helper()
	id := strings.ToLower(newID(t))
	ref := "wsbroker-test/no-sftp:" + id[len(id)-8:]
	name := "wsbroker-test-build-" + id
	out, err := dockerCLI(t, "run", "--name", name, "--user", "0", "--entrypoint", "rm", testImage, "-f",
		"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server")
	if err == nil {
		out, err = dockerCLI(t, "commit", "--change", "USER 1000:1000", "--change", `CMD ["-rf", "/workspace"]`, name, ref)
	}
	if rmOut, rmErr := dockerCLI(t, "rm", "-f", name); rmErr != nil {
		t.Errorf("removing %s: %v: %s", name, rmErr, rmOut)
	}
	if err != nil {
		t.Fatalf("building %s: %v: %s", ref, err, out)
	}
	t.Cleanup(func() {
		if out, err := dockerCLI(t, "rmi", "-f", ref); err != nil {
			t.Errorf("removing %s: %v: %s", ref, err, out)
		}
	})
	return ref
}

// TestImageWithoutSFTPServer: the broker's own server, injected read-only,
// serves an image that has none; with injection off, file operations
// fail clearly.
func TestImageWithoutSFTPServer(t *testing.T) {
	testutil.RequireImage(t, testImage)
	ref := noSFTPImage(t)
	b := newBackend(t, func(c *docker.Config) { c.AllowedImages = []string{"wsbroker-test/*"} })
	ws := create(t, b, map[string]string{"image": ref})
	if out := sh(t, ws, "ls /usr/lib/openssh/sftp-server 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Fatalf("the derived image still has sftp-server: %q", out)
	}
	if err := ws.Mkdir(t.Context(), "d/e"); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile(t.Context(), "d/e/f.txt", strings.NewReader("served")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ws, "d/e/f.txt"); got != "served" {
		t.Errorf("read back %q", got)
	}
	if got := sh(t, ws, "cat d/e/f.txt"); got != "served" {
		t.Errorf("command sees %q", got)
	}
	if pid := serverPid(t, ws, docker.InjectedSFTPServer); pid == "" {
		t.Error("the injected server is not the one running")
	}
	if out := sh(t, ws, "echo x > "+docker.InjectedSFTPServer+" 2>&1 || echo refused"); !strings.Contains(out, "refused") {
		t.Errorf("the injected server is writable: %q", out)
	}

	imageOnly := newBackend(t, func(c *docker.Config) {
		c.AllowedImages = []string{"wsbroker-test/*"}
		c.SFTPServer = docker.SFTPImage
	})
	bare := create(t, imageOnly, map[string]string{"image": ref})
	_, err := bare.Stat(t.Context(), ".")
	if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "no sftp server") {
		t.Errorf("Stat without any server: %v, want ErrUnavailable naming the missing server", err)
	}
	// Commands do not need the channel; /proc stays refused without it.
	sh(t, bare, "mkdir -p sub")
	var out strings.Builder
	if _, err := bare.Exec(t.Context(), opsapi.ExecRequest{Command: "pwd", Cwd: "sub", Output: &out}); err != nil || out.String() != "/workspace/sub\n" {
		t.Errorf("Exec in sub without a channel: %q, %v", out.String(), err)
	}
	if _, err := bare.Exec(t.Context(), opsapi.ExecRequest{Command: "true", Cwd: "/proc/self/fd/7"}); !errors.Is(err, opsapi.ErrPermission) {
		t.Errorf("Exec in /proc without a channel: %v, want ErrPermission", err)
	}
}

// TestNewChecksTheInjectedBinary: a dynamically linked or missing binary
// is refused at start, before any container gets it.
func TestNewChecksTheInjectedBinary(t *testing.T) {
	testutil.RequireCommand(t, "sh")
	for _, bin := range []string{"/bin/sh", filepath.Join(t.TempDir(), "missing")} {
		cfg := docker.NewConfig()
		cfg.Identity = testutil.BrokerIdentity
		cfg.AgentBinary = bin
		if _, err := docker.New(cfg, testutil.Logger(t)); !errors.Is(err, opsapi.ErrInvalid) {
			t.Errorf("agentBinary %s: %v, want ErrInvalid", bin, err)
		}
	}
	if _, err := os.Stat(sftpBinary); err != nil {
		t.Fatal(err)
	}
}

// TestOldAgentBinaryKey: the agent binary's old YAML key, sftpServerBinary,
// still names it (a missing file is refused as under agentBinary), and
// the start warns once that it is deprecated. No engine is needed: the
// warning comes before the engine is asked.
func TestOldAgentBinaryKey(t *testing.T) {
	start := func(bin string) (string, error) {
		var cfg docker.Config
		dec := yaml.NewDecoder(strings.NewReader("host: unix:///nonexistent/docker.sock\nsftpServerBinary: " + bin + "\n"))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			t.Fatal(err)
		}
		cfg.Identity = testutil.BrokerIdentity
		var logs testutil.LockedBuffer
		_, err := docker.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		return logs.String(), err
	}
	if _, err := start(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, opsapi.ErrInvalid) {
		t.Errorf("sftpServerBinary naming a missing file: %v, want ErrInvalid", err)
	}
	logs, err := start(sftpBinary)
	if !errors.Is(err, opsapi.ErrUnavailable) {
		t.Errorf("New with no engine: %v, want ErrUnavailable", err)
	}
	if n := strings.Count(logs, "sftpServerBinary is deprecated"); n != 1 {
		t.Errorf("the deprecation is logged %d times, want once:\n%s", n, logs)
	}
	if strings.Contains(logs, "no sftp server binary to inject") {
		t.Errorf("the binary under the old key was not used:\n%s", logs)
	}
}

// TestCancelKillsTheTreeInside: a canceled command's whole tree, a
// grandchild in a new session included, is gone from the container, as
// a second exec (the docker CLI's) sees it.
func TestCancelKillsTheTreeInside(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type outcome struct {
		res opsapi.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: `setsid sh -c 'echo $$ > /tmp/gc.pid; exec sleep 600' </dev/null >/dev/null 2>&1 &
sh -c 'echo $$ > /tmp/child.pid; exec sleep 601' & wait`})
		done <- outcome{res, err}
	}()
	alive := func(file string) bool {
		_, err := dockerCLI(t, "exec", ws.ContainerID(), "sh", "-c", "kill -0 $(cat "+file+")")
		return err == nil
	}
	if !eventually(20*time.Second, func() bool { return alive("/tmp/gc.pid") && alive("/tmp/child.pid") }) {
		t.Fatal("the command tree never started")
	}
	cancel()
	select {
	case o := <-done:
		if o.err != nil || !o.res.Canceled || o.res.Killed < 2 {
			t.Fatalf("canceled Exec: %+v, %v", o.res, o.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exec did not return within 30s of cancel")
	}
	if alive("/tmp/gc.pid") || alive("/tmp/child.pid") {
		t.Error("a process of the canceled tree is still alive")
	}
	if out, _ := dockerCLI(t, "exec", ws.ContainerID(), "ps", "-eo", "args"); strings.Contains(out, "sleep 60") {
		t.Errorf("processes left in the container:\n%s", out)
	}
}

// TestCloseLeavesNoGoroutines: a backend that made and used workspaces
// (files, commands, a search cut short, a canceled command) leaves no
// goroutine behind once they are destroyed and it is closed.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	testutil.RequireImage(t, testImage)
	before := runtime.NumGoroutine()
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.AgentBinary = sftpBinary
	cfg.IdleTTL = time.Hour
	b, err := docker.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t)})
	if err != nil {
		t.Fatal(err)
	}
	w := ws.(*docker.Workspace)
	if err := w.WriteFile(t.Context(), "f.txt", strings.NewReader(strings.Repeat("match\n", 500))); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Search(t.Context(), opsapi.SearchRequest{Pattern: "match", Path: ".", Limit: 3}); err != nil {
		t.Fatal(err)
	}
	sh(t, w, "sleep 30 & echo bg")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if res, err := w.Exec(ctx, opsapi.ExecRequest{Command: "sleep 60"}); err != nil || !res.Canceled {
		t.Fatalf("canceled command: %+v, %v", res, err)
	}
	if err := w.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !eventually(15*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

// TestForkBombIsKilledAtTimeout: a fork bomb stops at the pids limit, and
// at its deadline the whole bomb dies even though the kill script cannot
// fork any more (the builtin-only killer takes over), in its own process
// group or in new sessions; the next command runs.
func TestForkBombIsKilledAtTimeout(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, map[string]any{"limits": map[string]any{"pids": 200}})
	for _, bomb := range []string{
		`bomb() { bomb | bomb & }; bomb; sleep 100`,
		`setsid bash -c 'bomb() { setsid bash -c "$(declare -f bomb); bomb" & bomb & }; bomb' & sleep 100`,
	} {
		start := time.Now()
		res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: bomb, Timeout: 3 * time.Second})
		if err != nil || !res.TimedOut || res.Killed < 10 {
			t.Fatalf("fork bomb %q: %+v, %v", bomb, res, err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the bomb took %v to kill", d)
		}
		// init, the main process, the SFTP server, this command's own.
		out := sh(t, ws, "ps -e -o stat= | grep -vc '^Z'") // zombies are dead, only not yet reaped by init
		if n, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || n > 12 {
			t.Errorf("%q processes left after killing %q", out, bomb)
		}
	}
}

// TestOOMIsReported: a command that outgrows the memory limit is killed by
// the kernel inside the container, and the result says so; the next
// command runs.
func TestOOMIsReported(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, map[string]any{"limits": map[string]any{"memory": "64MiB"}})
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: `x=$(head -c 200M /dev/zero | tr '\0' a); echo ${#x}`})
	if err != nil || !res.OOMKilled {
		t.Fatalf("memory hog: %+v, %v; want OOMKilled", res, err)
	}
	if res.MemoryLimit != 64<<20 {
		t.Errorf("MemoryLimit = %d, want the workspace's 64 MiB", res.MemoryLimit)
	}
	res, err = ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true"})
	if err != nil || res.OOMKilled || res.ExitCode != 0 {
		t.Fatalf("the next command: %+v, %v", res, err)
	}
}

// TestBrokersSharingAnEngine: two brokers on one engine (two identities)
// never adopt each other's workspaces nor remove each other's orphaned
// volumes; a broker that lost its own records finds its workspaces and
// their owners on the engine. Before identities, List took every
// container labelled wsbroker.managed.
func TestBrokersSharingAnEngine(t *testing.T) {
	b1 := newBackend(t)
	created, err := b1.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	ws := created.(*docker.Workspace)
	t.Cleanup(func() { _ = ws.Destroy(context.Background()) })
	labels := inspectContainer(t, ws.ContainerID()).Config.Labels
	if labels[docker.LabelBroker] != testutil.BrokerIdentity || labels[docker.LabelOwner] != "alice" {
		t.Errorf("labels %v, want broker %s and owner alice", labels, testutil.BrokerIdentity)
	}
	// An orphaned volume of the first broker, old enough to be removed.
	orphan := "wsbroker-" + newID(t)
	if out, err := dockerCLI(t, "volume", "create", "--label", docker.LabelManaged+"=1",
		"--label", docker.LabelWorkspace+"="+strings.TrimPrefix(orphan, "wsbroker-"),
		"--label", docker.LabelCreatedAt+"="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano),
		"--label", docker.LabelBroker+"="+testutil.BrokerIdentity, orphan); err != nil {
		t.Fatal(out)
	}
	t.Cleanup(func() { _, _ = dockerCLI(t, "volume", "rm", "-f", orphan) })

	other := newBackend(t, func(c *docker.Config) { c.Identity = "other-" + testutil.BrokerIdentity })
	found, err := other.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := found[ws.ID()]; ok {
		t.Errorf("another broker adopted %s", ws.ID())
	}
	if _, err := dockerCLI(t, "volume", "inspect", orphan); err != nil {
		t.Errorf("another broker removed the first one's orphaned volume")
	}

	again := newBackend(t)
	found, err = again.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := found[ws.ID()].(*docker.Workspace)
	if !ok || got.Owner() != "alice" {
		t.Fatalf("the first broker's restart found %v (owner %q), want %s owned by alice", ok, ownerOf(got), ws.ID())
	}
	if _, err := dockerCLI(t, "volume", "inspect", orphan); err == nil {
		t.Errorf("the first broker did not remove its own orphaned volume")
	}
}

func ownerOf(w *docker.Workspace) string {
	if w == nil {
		return ""
	}
	return w.Owner()
}

// TestContainerRemovedBehindTheBrokersBack: a workspace whose container
// was removed with the engine's own tools says it is gone, in the broker's
// words (the engine's "No such container" used to reach the client as an
// unavailable engine), and can still be deleted.
func TestContainerRemovedBehindTheBrokersBack(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	sh(t, ws, "true")
	if out, err := dockerCLI(t, "rm", "-f", ws.ContainerID()); err != nil {
		t.Fatal(out)
	}
	_, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true"})
	if !errors.Is(err, opsapi.ErrNotExist) || !strings.Contains(err.Error(), "is gone: its container was removed outside the broker") ||
		strings.Contains(err.Error(), "No such container") {
		t.Fatalf("Exec in a removed container: %v", err)
	}
	if ws.Gone() == "" {
		t.Error("Gone is empty after the container vanished")
	}
	if err := ws.Destroy(t.Context()); err != nil {
		t.Fatalf("Destroy after the container vanished: %v", err)
	}
}

// TestCommandsRunThroughTheAgent: with the injected binary, a command's
// parent is its reaper in the in-box agent, not an
// engine exec's wrapper, and files go over the agent too.
func TestCommandsRunThroughTheAgent(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, nil)
	transport := func(ws opsapi.Workspace) opsapi.Transport { return ws.(opsapi.TransportReporter).Transport() }
	if got := transport(ws); !got.Agent || got.Detail != "the agent starts at the first call" {
		t.Errorf("before the first call: %+v", got)
	}
	out := sh(t, ws, `tr '\0' ' ' < /proc/$PPID/cmdline`)
	if !strings.Contains(out, docker.InjectedSFTPServer+" reap") {
		t.Fatalf("the command's parent is %q, want the agent's reaper", out)
	}
	// The broker's socket is gone once the agent connected to it.
	if out := sh(t, ws, `ls -A `+docker.AgentRunDir); out != "" {
		t.Errorf("the run directory holds %q", out)
	}
	if got := transport(ws); got != (opsapi.Transport{Agent: true}) {
		t.Errorf("with the agent up: %+v", got)
	}

	off := create(t, newBackend(t, func(c *docker.Config) { c.Agent = docker.AgentOff }), nil)
	if got := transport(off); got.Agent || got.Detail != "agent: off in the configuration" {
		t.Errorf("agent off: %+v", got)
	}
	if out := sh(t, off, `tr '\0' ' ' < /proc/$PPID/cmdline`); strings.Contains(out, " reap") {
		t.Errorf("agent off, yet the command's parent is %q", out)
	}
}
