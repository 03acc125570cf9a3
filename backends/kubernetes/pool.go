package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Labels of the warm pools, which keep pods made ahead, each running with
// its agent connected (docs/backends.md, "Warm pools"). An unclaimed
// member is held by the replica whose exec stream its agent lives on
// (LabelHolder); each replica keeps a Lease while it lives, and sweeps the
// members of replicas whose lease stopped changing. A pod cannot be
// renamed, so a claim is a ConfigMap named as the workspace's pod would be
// (podName), owned by the member and naming it: the API server's atomic
// create lets one claim of an id succeed, and a cold create and a claim
// each look for the other after making their own.
const (
	LabelPool        = "wsbroker.pool"        // a member's pool
	LabelHolder      = "wsbroker.pool-holder" // the replica holding an unclaimed member
	LabelClaimed     = "wsbroker.claimed"     // "1": a member that is a workspace now, and its claim
	LabelReplica     = "wsbroker.replica"     // "1" on a replica's lease
	AnnotationMember = "wsbroker/member"      // on a claim: the member pod it took
)

// MaxPoolSize bounds one pool: each member is a running pod.
const MaxPoolSize = warmpool.MaxSize

// Names: a member's pod, and a replica's lease. Neither can be a
// workspace pod's name (namePrefix and 20 hex digits).
const (
	memberPrefix = namePrefix + "pool-"
	leasePrefix  = namePrefix + "replica-"
)

// Timings of the pools (variables for the tests). A lease whose
// resource version has not changed for leaseTTL, by the clock of the
// replica looking, is a dead replica's: versions, not the renew times
// written in it, so that clocks of replicas need not agree.
var (
	leaseRenew = 15 * time.Second
	leaseTTL   = time.Minute
	sweepEvery = 30 * time.Second
	poolRetry  = 10 * time.Second
)

// PoolConfig is one warm pool: Size ready pods with the settings a create
// request with these options gets. Empty options are the configured
// defaults; a create matches the pool when its options resolve to the
// same image and limits, however it spells them.
type PoolConfig struct {
	// Spec holds name, size (1 to MaxPoolSize ready pods), image, memory
	// and cpus.
	warmpool.Spec `yaml:",inline"`
	// Disk is a create option too, checked as a request's is.
	Disk ByteSize `json:"disk" yaml:"disk"`
}

// pool is one configured warm pool.
type pool struct {
	cfg     PoolConfig
	spec    spec
	members *warmpool.Pool[*member]
}

// member is a ready pod of a pool: running, its agent connected. Its
// Workspace is named as the pod and is never in the backend's table.
type member struct {
	w   *Workspace
	uid types.UID // of the pod: its claim's owner
}

// pools is the backend's warm pools, its replica's lease, and the
// goroutines keeping both.
type pools struct {
	list     []*pool
	instance string // this replica, on its lease and its members
	set      warmpool.Set[*member]
}

// setupPools checks each configured pool's options as a create request's
// would be, then starts the lease keeper and a filler per pool.
func (b *Backend) setupPools() error {
	if len(b.cfg.Pools) == 0 {
		return nil
	}
	b.pools.set = warmpool.Set[*member]{Alive: func(m *member) bool { return m.w.AgentLive() }, Remove: b.removeMember,
		Name: func(m *member) string { return m.w.pod }, Logger: b.logger}
	var errs []error
	for _, pc := range b.cfg.Pools {
		o := createOptions{Image: pc.Image}
		if pc.Memory != 0 || pc.CPUs != 0 || pc.Disk != 0 {
			o.Limits = &createLimits{Memory: pc.Memory, CPUs: pc.CPUs, Disk: pc.Disk}
		}
		s, err := b.check(o)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", pc.Name, err))
			continue
		}
		b.pools.list = append(b.pools.list, &pool{cfg: pc, spec: s, members: b.pools.set.Add(pc.Name, pc.Size)})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	b.pools.instance = randomHex(8)
	b.pools.set.Go(b.keepLease)
	for _, p := range b.pools.list {
		b.pools.set.Fill(p.members, func(ctx context.Context) (*member, error) { return b.makeMember(ctx, p) }, poolRetry)
	}
	return nil
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // never fails (crypto/rand)
	return hex.EncodeToString(buf)
}

// poolFor is the pool whose members have settings s, or nil.
func (b *Backend) poolFor(s spec) *pool {
	for _, p := range b.pools.list {
		if p.spec == s {
			return p
		}
	}
	return nil
}

// makeMember makes one pod of p, waits until it runs and starts its
// agent. A member that does not get there is removed.
func (b *Backend) makeMember(ctx context.Context, p *pool) (*member, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	name := memberPrefix + randomHex(8)
	labels := b.selector()
	labels[LabelPool] = p.cfg.Name
	labels[LabelHolder] = b.pools.instance
	pod := b.podSpec(metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{AnnotationRoot: b.cfg.WorkspaceDir}}, p.spec)
	made, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, apiErr("kubernetes.pool", name, err)
	}
	m := &member{w: newWorkspace(b, name, name, "", b.cfg.WorkspaceDir, time.Now(), p.spec.memory, storeContainerName), uid: made.UID}
	m.w.member = true
	if err := b.start(ctx, m.w, "removed from the pool"); err != nil {
		return nil, err
	}
	return m, nil
}

// claim makes workspace ws of member m of p: the claim, then the
// member's labels and annotations. An id that is taken is ErrExist and
// m goes back to p; any other failure removes m (it may be half
// claimed), and the caller makes a pod instead.
func (b *Backend) claim(ctx context.Context, op string, ws opsapi.WorkspaceSpec, p *pool, m *member) (*Workspace, error) {
	claims := b.cs.CoreV1().ConfigMaps(b.cfg.Namespace)
	name := podName(ws.ID)
	labels := b.selector()
	labels[LabelClaimed] = "1"
	no := false
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations:     map[string]string{AnnotationWorkspace: ws.ID, AnnotationMember: m.w.pod},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: m.w.pod, UID: m.uid, Controller: &no}}}}
	if _, err := claims.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			b.pools.set.GiveBack(p.members, m)
			return nil, opsapi.E(op, ws.ID, opsapi.ErrExist, errors.New("workspace exists"))
		}
		b.pools.set.RemoveLater(m)
		return nil, apiErr(op, ws.ID, err)
	}
	unclaim := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := claims.Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.logger.Warn("a failed claim could not be removed; it goes with its member", "workspace", ws.ID, "err", err)
		}
	}
	_, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		unclaim()
		b.pools.set.GiveBack(p.members, m)
		if err == nil {
			return nil, opsapi.E(op, ws.ID, opsapi.ErrExist, errors.New("workspace exists"))
		}
		return nil, apiErr(op, ws.ID, err)
	}
	created := time.Now().UTC()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{LabelClaimed: "1", LabelHolder: nil},
		"annotations": b.workspaceAnnotations(ws, created),
	}})
	if err != nil {
		return nil, err
	}
	if _, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Patch(ctx, m.w.pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		unclaim()
		b.pools.set.RemoveLater(m)
		return nil, apiErr(op, ws.ID, err)
	}
	w := b.adopt(ws.ID, m.w.pod, ws.Owner, m.w.Root(), created, m.w.memory, m.w.store)
	w.stream.Store(m.w.stream.Load())
	w.TakeAgent(m.w.Workspace)
	w.Logger().Info("workspace created from the warm pool", "pool", p.cfg.Name)
	return w, nil
}

// claimed says whether pod is workspace id's through a claim, that is
// not named for id.
func claimed(pod, id string) bool { return pod != podName(id) }

// claimedPods are this broker's claims: claim (podName of a workspace
// id) to the member pod it names.
func (b *Backend) claimedPods(ctx context.Context) (map[string]string, error) {
	labels := b.selector()
	labels[LabelClaimed] = "1"
	list, err := b.cs.CoreV1().ConfigMaps(b.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selectorOf(labels)})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list.Items))
	for _, cm := range list.Items {
		if c, ok := claimOf(&cm); ok {
			out[cm.Name] = c
		}
	}
	return out, nil
}

// claimOf is the member pod claim cm names, when cm is a claim made for
// the workspace id it names.
func claimOf(cm *corev1.ConfigMap) (string, bool) {
	member := cm.Annotations[AnnotationMember]
	id := cm.Annotations[AnnotationWorkspace]
	return member, validID.MatchString(id) && cm.Name == podName(id) && member != "" && cm.DeletionTimestamp == nil
}

// removeMember removes a member that is not (or no longer) to be used.
func (b *Backend) removeMember(m *member) { m.w.Discard("removed from the pool") }

// keepLease keeps this replica's lease fresh and, every sweepEvery,
// removes the unclaimed members of replicas whose lease is not, until
// ctx ends.
func (b *Backend) keepLease(ctx context.Context) {
	seen := map[string]leaseSeen{}
	renew := time.NewTicker(leaseRenew)
	defer renew.Stop()
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	b.renewLease(ctx)
	b.sweep(ctx, seen)
	for {
		select {
		case <-renew.C:
			b.renewLease(ctx)
		case <-sweep.C:
			b.sweep(ctx, seen)
		case <-ctx.Done():
			return
		}
	}
}

// leaseSeen is a lease's resource version, and when this replica first
// saw it.
type leaseSeen struct {
	version string
	at      time.Time
}

// renewLease writes the lease's renew time, making the lease when it is
// not there (the first time, or after another replica took it for dead).
func (b *Backend) renewLease(ctx context.Context) {
	leases := b.cs.CoordinationV1().Leases(b.cfg.Namespace)
	name := leasePrefix + b.pools.instance
	now := metav1.NewMicroTime(time.Now())
	patch := fmt.Appendf(nil, `{"spec":{"renewTime":%q}}`, now.Format(metav1.RFC3339Micro))
	_, err := leases.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		labels := b.selector()
		labels[LabelReplica] = "1"
		ttl := int32(leaseTTL / time.Second)
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &b.pools.instance, LeaseDurationSeconds: &ttl,
				AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		b.logger.Warn("the replica's lease could not be renewed", "lease", name, "err", err)
	}
}

// sweep removes the unclaimed members whose holder has no live lease,
// and the leases of dead replicas.
func (b *Backend) sweep(ctx context.Context, seen map[string]leaseSeen) {
	live := b.liveReplicas(ctx, seen)
	if live == nil {
		return
	}
	labels := b.selector()
	sel := selectorOf(labels) + "," + LabelPool + ",!" + LabelClaimed
	pods, err := b.cs.CoreV1().Pods(b.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		b.logger.Warn("pool members could not be listed", "err", err)
		return
	}
	for _, p := range pods.Items {
		if live[p.Labels[LabelHolder]] || p.DeletionTimestamp != nil {
			continue
		}
		if err := b.deletePod(ctx, p.Name); err != nil {
			b.logger.Warn("a dead replica's pool member could not be removed", "member", p.Name, "err", err)
			continue
		}
		b.logger.Info("a pool member of a replica that is gone was removed", "member", p.Name, "holder", p.Labels[LabelHolder])
	}
}

// liveReplicas are the holders whose lease changed within leaseTTL (this
// replica always among them); the leases of the others are deleted. Nil
// when the leases cannot be listed.
func (b *Backend) liveReplicas(ctx context.Context, seen map[string]leaseSeen) map[string]bool {
	labels := b.selector()
	labels[LabelReplica] = "1"
	leases := b.cs.CoordinationV1().Leases(b.cfg.Namespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: selectorOf(labels)})
	if err != nil {
		b.logger.Warn("the replicas' leases could not be listed", "err", err)
		return nil
	}
	now := time.Now()
	live := map[string]bool{b.pools.instance: true}
	present := map[string]bool{}
	for _, l := range list.Items {
		present[l.Name] = true
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		s, ok := seen[l.Name]
		if !ok || s.version != l.ResourceVersion {
			seen[l.Name] = leaseSeen{version: l.ResourceVersion, at: now}
			live[holder] = true
			continue
		}
		if now.Sub(s.at) < leaseTTL || holder == b.pools.instance {
			live[holder] = true
			continue
		}
		// Only this version: a replica that renewed it meanwhile lives.
		version := l.ResourceVersion
		err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &version}})
		if err != nil && !apierrors.IsNotFound(err) {
			live[holder] = true // renewed, or unknown: not swept this time
			continue
		}
		b.logger.Info("a replica's lease expired", "lease", l.Name)
	}
	for name := range seen {
		if !present[name] {
			delete(seen, name)
		}
	}
	return live
}

// closePools stops the keeper and the fillers, removes every ready
// member (they would run unused: no other replica can use their agents)
// and deletes the lease.
func (b *Backend) closePools() {
	if b.pools.list == nil {
		return
	}
	b.pools.set.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := leasePrefix + b.pools.instance
	if err := b.cs.CoordinationV1().Leases(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.logger.Warn("the replica's lease could not be deleted; it expires", "lease", name, "err", err)
	}
}

// Pools says how full each pool is (opsapi.PoolReporter).
func (b *Backend) Pools() []opsapi.PoolStatus { return b.pools.set.Status() }

var _ opsapi.PoolReporter = (*Backend)(nil)
