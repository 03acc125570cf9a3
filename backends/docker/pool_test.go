package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/opsapi"
)

// withPool gives the backend one pool of size n with the default options
// under an identity of the test's own, so no other test's List adopts
// its members.
func withPool(identity string, n int) func(*docker.Config) {
	return func(c *docker.Config) {
		c.Identity = identity
		c.Pools = []docker.PoolConfig{{Spec: warmpool.Spec{Name: "default", Size: n}}}
	}
}

// waitReady waits until b's first pool has n ready members.
func waitReady(t *testing.T, b *docker.Backend, n int) {
	t.Helper()
	if !eventually(60*time.Second, func() bool { return b.Pools()[0].Ready == n }) {
		t.Fatalf("pool: %+v, want %d ready", b.Pools(), n)
	}
}

// poolContainers are the names of the containers of identity's pools,
// claimed or not, as the engine lists them.
func poolContainers(t *testing.T, identity string) []string {
	t.Helper()
	out, err := dockerCLI(t, "ps", "-a", "--filter", "label="+docker.LabelBroker+"="+identity,
		"--filter", "label="+docker.LabelPool, "--format", "{{.Names}}")
	if err != nil {
		t.Fatal(out)
	}
	return strings.Fields(out)
}

// TestPoolCreateTakesAReadyMember: a create with the pool's options gets a
// member, already running its agent, under the workspace's name; the
// pool refills; another create's options get a container of their own;
// destroy removes the member's container and both volumes.
func TestPoolCreateTakesAReadyMember(t *testing.T) {
	identity := "pool-" + newID(t)[2:10]
	b := newBackend(t, withPool(identity, 1))
	waitReady(t, b, 1)
	members := poolContainers(t, identity)
	if len(members) != 1 || !strings.HasPrefix(members[0], "wsbroker.pool.") {
		t.Fatalf("pool containers: %q", members)
	}

	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	w := ws.(*docker.Workspace)
	t.Cleanup(func() { _ = w.Destroy(context.Background()) }) // a second Destroy is no error
	got := inspectContainer(t, w.ContainerID())
	if got.Config.Labels[docker.LabelMember] != members[0] {
		t.Fatalf("the workspace's container is not the pool's member %s: labels %v", members[0], got.Config.Labels)
	}
	if tr := w.Transport(); !tr.Agent || tr.Detail != "" {
		t.Errorf("transport of a claimed member: %+v, want its agent already connected", tr)
	}
	if w.Owner() != "alice" {
		t.Errorf("owner %q", w.Owner())
	}
	if err := w.WriteFile(t.Context(), "f.txt", strings.NewReader("pooled")); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, w, "cat f.txt; hostname"); out != "pooledworkspace\n" {
		t.Errorf("output %q", out)
	}
	waitReady(t, b, 1)

	other, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Options: []byte(`{"limits":{"pids":300}}`)})
	if err != nil {
		t.Fatal(err)
	}
	od := other.(*docker.Workspace)
	t.Cleanup(func() { _ = od.Destroy(context.Background()) })
	if l := inspectContainer(t, od.ContainerID()).Config.Labels[docker.LabelMember]; l != "" {
		t.Errorf("a create with other limits got pool member %s", l)
	}

	if err := w.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{members[0], "wsbroker-" + w.ID()} {
		if out, err := dockerCLI(t, "volume", "inspect", v); err == nil {
			t.Errorf("volume %s still exists: %s", v, out)
		}
	}
	if out, err := dockerCLI(t, "container", "inspect", w.ContainerID()); err == nil {
		t.Errorf("container still exists: %s", out)
	}
}

// TestPoolClaimIsRediscovered: a claimed member is the workspace after a
// restart (id, owner, creation time kept by the engine); ready members
// are removed when the backend closes.
func TestPoolClaimIsRediscovered(t *testing.T) {
	identity := "pool-" + newID(t)[2:10]
	b1 := newBackend(t, withPool(identity, 1))
	waitReady(t, b1, 1)
	ws, err := b1.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Owner: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	w := ws.(*docker.Workspace)
	if err := w.WriteFile(t.Context(), "kept.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b1, 1)
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	if got := poolContainers(t, identity); len(got) != 1 || got[0] != "wsbroker-"+w.ID() {
		t.Fatalf("after close, pool containers %q: want only the claimed one", got)
	}

	b2 := newBackend(t, func(c *docker.Config) { c.Identity = identity })
	found, err := b2.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := found[w.ID()].(*docker.Workspace)
	if !ok || len(found) != 1 {
		t.Fatalf("List found %d workspaces, not %s", len(found), w.ID())
	}
	if got.Owner() != "bob" || !got.CreatedAt().Equal(w.CreatedAt()) || got.ContainerID() != w.ContainerID() {
		t.Errorf("rediscovered: owner %q created %v container %s; want bob %v %s",
			got.Owner(), got.CreatedAt(), got.ContainerID(), w.CreatedAt(), w.ContainerID())
	}
	if tr := got.Transport(); !tr.Agent {
		t.Errorf("rediscovered claim has no agent: %+v", tr)
	}
	if out := sh(t, got, "cat kept.txt"); out != "kept" {
		t.Errorf("file after restart: %q", out)
	}
	if err := got.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := poolContainers(t, identity); len(got) != 0 {
		t.Errorf("left: %q", got)
	}
	if out, _ := dockerCLI(t, "volume", "ls", "-q", "--filter", "label="+docker.LabelBroker+"="+identity); strings.TrimSpace(out) != "" {
		t.Errorf("volumes left: %s", out)
	}
}

// TestPoolMembersAreTakenBack: members a broker left running (it did not
// close) are taken back by the next one with the same pool, and removed
// by one whose pool has other settings.
func TestPoolMembersAreTakenBack(t *testing.T) {
	identity := "pool-" + newID(t)[2:10]
	b1 := newBackend(t, withPool(identity, 1))
	waitReady(t, b1, 1)
	left := poolContainers(t, identity)

	b2 := newBackend(t, withPool(identity, 1)) // b1 never closed: as after a crash
	waitReady(t, b2, 1)
	if got := poolContainers(t, identity); !slicesEqual(got, left) {
		t.Errorf("pool containers %q, want the one left, %q, taken back", got, left)
	}

	b3 := newBackend(t, func(c *docker.Config) {
		withPool(identity, 1)(c)
		c.Pools[0].Pids = 500
	})
	waitReady(t, b3, 1)
	if got := poolContainers(t, identity); len(got) != 1 || got[0] == left[0] {
		t.Errorf("pool containers %q: the member made with other settings (%s) should be gone", got, left[0])
	}
	b3.Close()
	if got := poolContainers(t, identity); len(got) != 0 {
		t.Errorf("after close: %q", got)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// TestPoolConfig: pools are checked with the rest of the configuration.
func TestPoolConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		pools []docker.PoolConfig
		disk  docker.ByteSize
		want  string
	}{
		"size 0":    {pools: []docker.PoolConfig{{Spec: warmpool.Spec{Name: "a"}}}, want: "size 0 must be between 1 and 64"},
		"too large": {pools: []docker.PoolConfig{{Spec: warmpool.Spec{Name: "a", Size: 65}}}, want: "size 65 must be between 1 and 64"},
		"duplicate": {pools: []docker.PoolConfig{{Spec: warmpool.Spec{Name: "a", Size: 1}}, {Spec: warmpool.Spec{Name: "a", Size: 1}}}, want: `name "a" must be unique`},
		"no name":   {pools: []docker.PoolConfig{{Spec: warmpool.Spec{Size: 1}}}, want: `name "" must be unique`},
		"disk":      {pools: []docker.PoolConfig{{Spec: warmpool.Spec{Name: "a", Size: 1}}}, disk: 64 << 20, want: "pools cannot be used with disk"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := docker.NewConfig()
			cfg.Identity = "x"
			cfg.Pools, cfg.Disk = tc.pools, tc.disk
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}
