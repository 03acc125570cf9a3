package kubernetes_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/opsapi"
)

// poolIdentity is a broker identity of its own for one test, so that
// its pools, claims and leases meet no other test's; everything with it
// is deleted when the test ends.
func poolIdentity(t *testing.T) string {
	id := "pool-" + newID(t)[len(newID(t))-8:]
	cs := clientset(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sel := metav1.ListOptions{LabelSelector: kubernetes.LabelBroker + "=" + id}
		ns := kubernetes.DefaultNamespace
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		_ = cs.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		_ = cs.CoordinationV1().Leases(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		_ = cs.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
	})
	return id
}

func withPool(identity string, n int) func(*kubernetes.Config) {
	return func(c *kubernetes.Config) {
		c.Identity = identity
		c.Pools = []kubernetes.PoolConfig{{Spec: warmpool.Spec{Name: "p", Size: n}}}
	}
}

func withIdentity(identity string) func(*kubernetes.Config) {
	return func(c *kubernetes.Config) { c.Identity = identity }
}

// waitReady waits until b's pool has n ready members.
func waitReady(t *testing.T, b *kubernetes.Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for b.Pools()[0].Ready != n {
		if time.Now().After(deadline) {
			t.Fatalf("pool: %+v, want %d ready", b.Pools(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// podsOf are the names of identity's pods that select matches.
func podsOf(t *testing.T, cs k8s.Interface, identity, selector string) []string {
	t.Helper()
	list, err := cs.CoreV1().Pods(kubernetes.DefaultNamespace).List(t.Context(), metav1.ListOptions{
		LabelSelector: kubernetes.LabelBroker + "=" + identity + "," + selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// TestPoolCreateTakesAReadyMember: a create with the pool's settings gets
// a member, its agent already connected; another replica finds, lists
// and deletes it; a second create of the id is refused through either
// path (a claim or a pod of its own) and takes no member; the id is free
// again once deleted; the pool refills.
func TestPoolCreateTakesAReadyMember(t *testing.T) {
	identity := poolIdentity(t)
	cs := clientset(t)
	b := newBackend(t, withPool(identity, 1))
	waitReady(t, b, 1)
	members := podsOf(t, cs, identity, kubernetes.LabelPool)
	if len(members) != 1 || !strings.HasPrefix(members[0], "wsbroker-pool-") {
		t.Fatalf("pool pods: %q", members)
	}

	id := newID(t)
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: id, Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	w := ws.(*kubernetes.Workspace)
	t.Cleanup(func() { _ = w.Destroy(context.Background()) })
	if w.Pod() != members[0] {
		t.Fatalf("the workspace's pod is %s, not the pool's member %s", w.Pod(), members[0])
	}
	if tr := w.Transport(); !tr.Agent || tr.Detail != "" {
		t.Errorf("transport of a claimed member: %+v, want its agent already connected", tr)
	}
	if err := w.WriteFile(t.Context(), "f.txt", strings.NewReader("pooled")); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, w, "cat f.txt; hostname"); out != "pooledworkspace\n" {
		t.Errorf("output %q", out)
	}
	pod, err := cs.CoreV1().Pods(kubernetes.DefaultNamespace).Get(t.Context(), w.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Annotations[kubernetes.AnnotationWorkspace] != id || pod.Annotations[kubernetes.AnnotationOwner] != "alice" ||
		pod.Labels[kubernetes.LabelHolder] != "" || pod.Labels[kubernetes.LabelClaimed] != "1" {
		t.Errorf("claimed pod: labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	waitReady(t, b, 1)

	// Another replica: Find and List see the claimed pod as the workspace.
	other := newBackend(t, withIdentity(identity))
	found, err := other.Find(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if out := sh(t, found.(opsapi.BashOperations), "cat f.txt"); out != "pooled" {
		t.Errorf("through another replica: %q", out)
	}
	listed, err := other.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if lw, ok := listed[id].(*kubernetes.Workspace); !ok || lw.Owner() != "alice" || lw.Pod() != w.Pod() ||
		!lw.CreatedAt().Equal(w.CreatedAt()) {
		t.Errorf("List: %v", listed)
	}
	if len(listed) != 1 {
		t.Errorf("List found %d workspaces, want 1 (members are not workspaces)", len(listed))
	}

	// The id is taken, whichever way a create goes.
	if _, err := other.Create(t.Context(), opsapi.WorkspaceSpec{ID: id}); !errors.Is(err, opsapi.ErrExist) {
		t.Errorf("a cold create of a claimed id: %v, want ErrExist", err)
	}
	if _, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: id}); !errors.Is(err, opsapi.ErrExist) {
		t.Errorf("a pool create of a claimed id: %v, want ErrExist", err)
	}
	if got := b.Pools()[0].Ready; got != 1 {
		t.Errorf("a refused claim cost the pool its member: %d ready", got)
	}
	cold := create(t, other, "", nil)
	if _, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: cold.ID()}); !errors.Is(err, opsapi.ErrExist) {
		t.Errorf("a pool create of a cold workspace's id: %v, want ErrExist", err)
	}

	// Deleted through the other replica: pod and claim go, the id is free.
	if err := found.(opsapi.Destroyer).Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(kubernetes.DefaultNamespace).Get(t.Context(), "wsbroker-"+idHash(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claim after delete: %v", err)
	}
	again, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: id})
	if err != nil {
		t.Fatalf("the id of a deleted workspace: %v", err)
	}
	t.Cleanup(func() { _ = again.(opsapi.Destroyer).Destroy(context.Background()) })
	if out := sh(t, again.(opsapi.BashOperations), "ls"); out != "" {
		t.Errorf("a new workspace of a reused id has files: %q", out)
	}
}

// TestPoolOtherSettingsMakeAPod: a create whose options resolve to other
// settings does not take a member; one that spells the pool's settings
// differently does.
func TestPoolOtherSettingsMakeAPod(t *testing.T) {
	identity := poolIdentity(t)
	b := newBackend(t, withPool(identity, 1))
	waitReady(t, b, 1)
	ws := create(t, b, "", map[string]any{"limits": map[string]any{"cpus": 0.5}})
	if strings.HasPrefix(ws.Pod(), "wsbroker-pool-") {
		t.Errorf("a create with other limits got member %s", ws.Pod())
	}
	same := create(t, b, "", map[string]any{"image": kubernetes.DefaultImage, "limits": map[string]any{"memory": "2GiB"}})
	if !strings.HasPrefix(same.Pod(), "wsbroker-pool-") {
		t.Errorf("the defaults spelt out got pod %s, not a member", same.Pod())
	}
}

// TestPoolRemovesADeadReplicasMembers: an unclaimed member whose holder
// has no lease is removed by a replica with pools when it starts; one
// whose holder's lease stops changing, once the lease has not changed
// for the lease's time to live; the backend's own members stay, and go,
// with its lease, when it closes.
func TestPoolRemovesADeadReplicasMembers(t *testing.T) {
	identity := poolIdentity(t)
	cs := clientset(t)
	ns := kubernetes.DefaultNamespace
	noLease := orphanMember(t, cs, identity, "0000000000000001", "deadbeef00000001")
	staleLease := orphanMember(t, cs, identity, "0000000000000002", "deadbeef00000002")
	holder, ttl := "deadbeef00000002", int32(60)
	_, err := cs.CoordinationV1().Leases(ns).Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "wsbroker-replica-" + holder, Labels: map[string]string{
			kubernetes.LabelManaged: "1", kubernetes.LabelBroker: identity, kubernetes.LabelReplica: "1"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(kubernetes.SetPoolTimings(200*time.Millisecond, 3*time.Second, 200*time.Millisecond))
	start := time.Now()
	b := newBackend(t, withPool(identity, 1))
	waitReady(t, b, 1)
	members := func() (pods []string, orphans int) {
		for _, p := range podsOf(t, cs, identity, kubernetes.LabelPool) {
			pods = append(pods, p)
			if p == noLease || p == staleLease {
				orphans++
			}
		}
		return pods, orphans
	}
	// staleGone is when the stale lease's member was first seen gone: an
	// upper bound on when it was removed, so a removal that waited the
	// lease's time to live never fails the check below, however late a
	// poll of the API server comes back.
	var staleGone time.Duration
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		pods, orphans := members()
		if slices.Contains(pods, noLease) && time.Since(start) > 2*time.Second {
			t.Fatalf("the member of a replica without a lease is still there: %q", pods)
		}
		if staleGone == 0 && !slices.Contains(pods, staleLease) {
			staleGone = time.Since(start)
		}
		if len(pods) == 1 && orphans == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool pods a minute on: %q, want only the backend's own member", pods)
		}
	}
	if staleGone < 3*time.Second {
		t.Errorf("the member of a replica whose lease had not yet expired was gone after %v", staleGone)
	}
	leases, err := cs.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: kubernetes.LabelBroker + "=" + identity})
	if err != nil || len(leases.Items) != 1 || leases.Items[0].Name == "wsbroker-replica-"+holder {
		t.Fatalf("leases: want only the backend's own: %v %v", leases, err)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if pods := podsOf(t, cs, identity, kubernetes.LabelPool); len(pods) != 0 {
		t.Errorf("pool pods after Close: %q", pods)
	}
	leases, err = cs.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: kubernetes.LabelBroker + "=" + identity})
	if err != nil || len(leases.Items) != 0 {
		t.Errorf("leases after Close: %v %v", leases, err)
	}
}

// orphanMember makes an unclaimed pool member of identity held by holder,
// as a replica that died would leave it.
func orphanMember(t *testing.T, cs k8s.Interface, identity, suffix, holder string) string {
	t.Helper()
	yes, uid := true, int64(1000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "wsbroker-pool-" + suffix, Labels: map[string]string{
			kubernetes.LabelManaged: "1", kubernetes.LabelBroker: identity,
			kubernetes.LabelPool: "p", kubernetes.LabelHolder: holder}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid},
			Containers: []corev1.Container{{Name: "workspace", Image: kubernetes.DefaultImage,
				ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "infinity"}}},
		},
	}
	if _, err := cs.CoreV1().Pods(kubernetes.DefaultNamespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod.Name
}

// idHash is the hash of workspace id that names its pod and its claim.
func idHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:10])
}

// TestPoolConfig: pools are checked as create requests are.
func TestPoolConfig(t *testing.T) {
	cfg := kubernetes.NewConfig()
	cfg.Identity = "x"
	cfg.Pools = []kubernetes.PoolConfig{{Spec: warmpool.Spec{Name: "a", Size: 0}}, {Spec: warmpool.Spec{Name: "a", Size: 1}}, {Spec: warmpool.Spec{Name: "b b", Size: 65}}}
	err := cfg.Validate()
	for _, want := range []string{"pools[0] (a): size 0", "pools[1]: name \"a\" must be unique", "pools[2]: name \"b b\"", "pools[2] (b b): size 65"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
	identity := poolIdentity(t)
	_, err = kubernetesNew(t, func(c *kubernetes.Config) {
		c.Identity = identity
		c.Pools = []kubernetes.PoolConfig{{Spec: warmpool.Spec{Name: "big", Size: 1, Memory: 64 << 30}}}
	})
	if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), "pool big: limits.memory") {
		t.Errorf("a pool above the limits: %v", err)
	}
}

// TestPoolMemberDeletedElsewhere: a member pod deleted behind the
// broker's back never becomes a workspace: the create gets a pod of its
// own, and the pool makes a new member.
func TestPoolMemberDeletedElsewhere(t *testing.T) {
	identity := poolIdentity(t)
	cs := clientset(t)
	b := newBackend(t, withPool(identity, 1))
	waitReady(t, b, 1)
	members := podsOf(t, cs, identity, kubernetes.LabelPool)
	if len(members) != 1 {
		t.Fatalf("pool pods: %q", members)
	}
	grace := int64(0)
	if err := cs.CoreV1().Pods(kubernetes.DefaultNamespace).Delete(t.Context(), members[0],
		metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	ws := create(t, b, "", nil)
	if ws.Pod() == members[0] {
		t.Fatalf("the create got the deleted member %s", ws.Pod())
	}
	if out := sh(t, ws, "echo ok"); out != "ok\n" {
		t.Errorf("output %q", out)
	}
	waitReady(t, b, 1)
}
