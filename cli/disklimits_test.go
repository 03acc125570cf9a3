package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/loopfs"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestLocalDiskLimitLoads: diskBytes sits beside the cgroup limits in
// local.limits, as docs/backends.md says.
func TestLocalDiskLimitLoads(t *testing.T) {
	var c local.Config
	if err := yaml.Unmarshal([]byte("limits: {memoryBytes: 1048576, diskBytes: 16777216}\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Limits.MemoryBytes != 1<<20 || c.Limits.DiskBytes != 16<<20 {
		t.Fatalf("limits loaded as %+v", c.Limits)
	}
}

// serveLocal runs serve with args on its own state directory until it
// prints the next step; it returns the client environment, the state
// directory, serve's log and a stop that returns once serve has.
func serveLocal(t *testing.T, args ...string) (env map[string]string, state string, logs *testutil.LockedBuffer, stop func()) {
	t.Helper()
	home, state := t.TempDir(), t.TempDir()
	stdout, logs := &testutil.LockedBuffer{}, &testutil.LockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		c := &CLI{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: logs, Getenv: envMap(map[string]string{"HOME": home})}
		done <- c.Run(ctx, append([]string{"serve", "--listen", freeAddr(t), "--state-dir", state}, args...))
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	next := regexp.MustCompile(`(?m)^Next, .*\n  (.*) broker ws create\n`)
	for deadline := time.Now().Add(30 * time.Second); !next.MatchString(stdout.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve never printed the next step; log:\n%s", logs.String())
		}
	}
	env = map[string]string{"HOME": home}
	for _, kv := range strings.Fields(next.FindStringSubmatch(stdout.String())[1]) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env, state, logs, stop
}

// TestServeGivesLocalWorkspacesADisk: with no configuration, serve gives
// a local workspace a filesystem of its own of 1 GiB, so a write past it
// is ENOSPC; stopping serve unmounts it (the state directory can be
// removed, no loop device stays). local.limits.diskBytes: -1 turns the
// default off, and the start warns.
func TestServeGivesLocalWorkspacesADisk(t *testing.T) {
	testutil.RequireLoopDevices(t)
	env, state, _, stop := serveLocal(t)
	out, errs, code := run(env, "", "ws", "create")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("ws create: %d %q", code, errs)
	}
	dir := filepath.Join(state, "local", "workspaces", id)
	if ok, err := loopfs.Mounted(dir); !ok || err != nil {
		t.Fatalf("the workspace directory is not a filesystem of its own: %v", err)
	}
	if _, size, err := loopfs.Usage(dir); err != nil || size > local.RecommendedDiskBytes || size < local.RecommendedDiskBytes*9/10 {
		t.Errorf("the workspace's filesystem is %d bytes (%v), want about %d", size, err, local.RecommendedDiskBytes)
	}
	out, _, code = run(env, "", "exec", id, "--", "sh", "-c", "echo kept > keep; fallocate -l 1100M big 2>&1; echo status $?")
	if code != 0 || !strings.Contains(out, "No space left on device") || !strings.Contains(out, "status 1") {
		t.Errorf("allocating 1100 MiB in the workspace: %d %q, want ENOSPC", code, out)
	}
	stop()
	if ok, _ := loopfs.Mounted(dir); ok {
		t.Error("the workspace's filesystem is still mounted after serve stopped")
	}
	if err := os.RemoveAll(state); err != nil {
		t.Errorf("removing the state directory of a stopped serve: %v", err)
	}

	conf := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(conf, []byte("local:\n  limits: {diskBytes: -1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, state, logs, _ := serveLocal(t, "--config", conf)
	if !strings.Contains(logs.String(), "disk limits off (local.limits.diskBytes: -1)") {
		t.Errorf("a serve with diskBytes -1 did not warn; log:\n%s", logs.String())
	}
	out, errs, code = run(env, "", "ws", "create")
	if code != 0 {
		t.Fatalf("ws create: %d %q", code, errs)
	}
	if ok, _ := loopfs.Mounted(filepath.Join(state, "local", "workspaces", strings.TrimSpace(out))); ok {
		t.Error("diskBytes -1: the workspace still has a filesystem of its own")
	}
}
