package client_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// replica is one broker serving the kubernetes backend on the test
// cluster, with the identity and token every replica shares.
type replica struct {
	c    *client.Client
	stop func() // the replica dies: its server and its backend close
	b    *kubernetes.Backend
}

func startReplica(t *testing.T, identity string, pools ...kubernetes.PoolConfig) *replica {
	t.Helper()
	cfg := kubernetes.NewConfig()
	cfg.Kubeconfig = testutil.RequireKube(t)
	cfg.Identity = identity
	cfg.ImagePullPolicy = "Never"
	cfg.KillGrace = 500 * time.Millisecond
	cfg.AgentBinary = testutil.AgentBinary(t)
	cfg.Pools = pools
	b, err := kubernetes.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	const token = "replicas-token-0123456789"
	srv, err := broker.New(broker.Config{Tokens: []string{token}, DefaultBackend: "kubernetes"},
		map[string]opsapi.Backend{"kubernetes": b}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ts.CloseClientConnections()
		ts.Close()
		_ = b.Close() // its agent streams end: their commands are killed
	}
	t.Cleanup(stop)
	return &replica{c: client.New(ts.URL, token, client.WithHTTPClient(ts.Client())), stop: stop, b: b}
}

// TestKubernetesReplicasWithPools: replicas that each keep a warm pool. A
// workspace created through one comes from its pool; another replica
// serves it through its claim, and a third, without pools, deletes it;
// each pool refills with members of its own.
func TestKubernetesReplicasWithPools(t *testing.T) {
	testutil.RequireKube(t)
	identity := "pools-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:12]
	pool := kubernetes.PoolConfig{Spec: warmpool.Spec{Name: "default", Size: 1}}
	a, b, c := startReplica(t, identity, pool), startReplica(t, identity, pool), startReplica(t, identity)
	ready := func(r *replica) bool { return r.b.Pools()[0].Ready == 1 }
	if !waitFor(2*time.Minute, func() bool { return ready(a) && ready(b) }) {
		t.Fatalf("pools: %+v and %+v", a.b.Pools(), b.b.Pools())
	}
	ctx := t.Context()
	info, err := a.c.CreateWorkspace(ctx, "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.c.DeleteWorkspace(context.Background(), info.ID) })
	if a.b.Pools()[0].Ready != 0 {
		t.Errorf("the create did not take the pool's member: %+v", a.b.Pools())
	}
	if err := b.c.WorkspaceFor(info).WriteFile(ctx, "f", strings.NewReader("through b")); err != nil {
		t.Fatalf("a write through another replica: %v", err)
	}
	if out := run(t, a.c.WorkspaceFor(info), "cat f"); out != "through b" {
		t.Errorf("read through the first: %q", out)
	}
	if err := c.c.DeleteWorkspace(ctx, info.ID); err != nil {
		t.Fatalf("delete through a replica without pools: %v", err)
	}
	gone := func() error {
		_, err := b.c.WorkspaceFor(info).Exec(ctx, opsapi.ExecRequest{Command: "true"})
		return err
	}
	if !waitFor(time.Minute, func() bool { return errors.Is(gone(), opsapi.ErrNotExist) }) {
		t.Errorf("after the delete, through the second: %v, want not found", gone())
	}
	if !waitFor(2*time.Minute, func() bool { return ready(a) && ready(b) }) {
		t.Errorf("pools did not refill: %+v and %+v", a.b.Pools(), b.b.Pools())
	}
}

// TestKubernetesReplicas: three brokers with one identity share the
// cluster and nothing else. A workspace made through the first is served
// by the second (which never listed it), a command running through the
// first is killed when that replica dies, and the workspace deleted
// through the third is gone for the second.
func TestKubernetesReplicas(t *testing.T) {
	testutil.RequireKube(t)
	identity := "replicas-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:12]
	a, b, c := startReplica(t, identity), startReplica(t, identity), startReplica(t, identity)
	ctx := t.Context()

	info, err := a.c.CreateWorkspace(ctx, "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = c.c.DeleteWorkspace(context.Background(), info.ID)
		}
	})
	wa, wb := a.c.WorkspaceFor(info), b.c.WorkspaceFor(info)
	if err := wb.WriteFile(ctx, "from-b.txt", strings.NewReader("written through b")); err != nil {
		t.Fatalf("a write through the second replica: %v", err)
	}
	if out := run(t, wa, "cat from-b.txt"); out != "written through b" {
		t.Errorf("the first replica reads %q", out)
	}

	// A command through the first replica, which then dies.
	const marker = "replica-marker-7f3a"
	running := make(chan error, 1)
	go func() {
		_, err := wa.Exec(context.Background(), opsapi.ExecRequest{Command: "sleep 300; : " + marker})
		running <- err
	}()
	// The pattern does not match its own text, so neither this shell nor
	// grep counts itself.
	count := `grep -l -a 'replica-marker-7f3[a]' /proc/[0-9]*/cmdline 2>/dev/null | wc -l`
	if !waitFor(30*time.Second, func() bool { return strings.TrimSpace(run(t, wb, count)) != "0" }) {
		t.Fatal("the command never showed up in the pod")
	}
	a.stop()
	if !waitFor(30*time.Second, func() bool { return strings.TrimSpace(run(t, wb, count)) == "0" }) {
		t.Errorf("the dead replica's command still runs: %s", run(t, wb, `ps -eo pid,args 2>/dev/null || true`))
	}
	if err := <-running; err == nil {
		t.Error("the call through the dead replica succeeded")
	}

	// Deleted through the third: gone for the second.
	if err := c.c.DeleteWorkspace(ctx, info.ID); err != nil {
		t.Fatalf("delete through the third replica: %v", err)
	}
	deleted = true
	if !waitFor(60*time.Second, func() bool {
		_, err := wb.Exec(ctx, opsapi.ExecRequest{Command: "true"})
		return errors.Is(err, opsapi.ErrNotExist)
	}) {
		_, err := wb.Exec(ctx, opsapi.ExecRequest{Command: "true"})
		t.Errorf("a call through the second replica after the delete: %v, want not found", err)
	}
}

// run runs command through ws and returns its output; it fails the test
// on an error or a non-zero exit.
func run(t *testing.T, ws opsapi.BashOperations, command string) string {
	t.Helper()
	var out strings.Builder
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: command, Output: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q: %+v %v: %s", command, res, err, out.String())
	}
	return out.String()
}

// waitFor polls cond every 200 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
