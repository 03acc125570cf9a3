package kubernetes

import (
	"context"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
)

// Workspace is one pod: files and commands through its agent
// (remote.Workspace), the pod's facts beside them.
type Workspace struct {
	*remote.Workspace
	b       *Backend
	pod     string
	owner   string
	created time.Time
	memory  int64  // the container's memory limit, for an OOM kill's report
	member  bool   // an unclaimed warm pool member, named as its pod
	store   string // the container that writes the agent's binary

	stream atomic.Pointer[remote.StdioConn] // the live agent's exec stream
}

// podBox is a Workspace as its remote.Transport: the agent on a pods/exec
// stream, the pod asked for when the agent cannot be reached, and the
// pod deleted.
type podBox Workspace

func newWorkspace(b *Backend, id, pod, owner, root string, created time.Time, memory int64, store string) *Workspace {
	w := &Workspace{b: b, pod: pod, owner: owner, created: created, memory: memory, store: store}
	w.Workspace = remote.New(remote.Config{Op: "kubernetes", ID: id, Root: root, Where: "in the pod",
		Logger: b.logger.With("workspace", id, "pod", pod), Exec: b.cfg.Exec, NoSync: true,
		MemoryLimit: func(context.Context) int64 { return w.memory }}, (*podBox)(w))
	return w
}

// CreatedAt is when the workspace was created, kept on its pod.
func (w *Workspace) CreatedAt() time.Time { return w.created }

// Owner is the tenant the pod's annotation names (opsapi.OwnerReporter).
func (w *Workspace) Owner() string { return w.owner }

// Pod is the name of the workspace's pod.
func (w *Workspace) Pod() string { return w.pod }

// vanishedReason is what Gone says of a pod deleted outside this broker.
const vanishedReason = "its pod was deleted outside this broker (by a replica sharing its identity, or kubectl)"

// Vanished asks the API server whether the pod is still there (and not
// being deleted), after its agent could not be reached: a replica may
// have deleted the workspace.
func (p *podBox) Vanished(ctx context.Context) string {
	pod, err := p.b.cs.CoreV1().Pods(p.b.cfg.Namespace).Get(ctx, p.pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && pod.DeletionTimestamp != nil {
		return vanishedReason
	}
	return ""
}

// Destroy deletes the pod (killing every process in it, its volumes with
// it) and the workspace's claim.
func (p *podBox) Destroy(ctx context.Context) error {
	id := p.ID()
	if err := p.b.deletePod(ctx, p.pod); err != nil {
		return apiErr("kubernetes.Destroy", id, err)
	}
	if !p.member && claimed(p.pod, id) {
		// The claim would go with its pod (it is the claim's owner), but
		// only when the cluster's garbage collector gets to it: the id is
		// free at once this way.
		err := p.b.cs.CoreV1().ConfigMaps(p.b.cfg.Namespace).Delete(ctx, podName(id), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			p.Logger().Warn("the workspace's claim could not be deleted; it goes with its pod", "err", err)
		}
	}
	// The agent's stream is then closed without waiting for the agent to
	// end it: it goes with its container.
	if sc := p.stream.Load(); sc != nil {
		sc.Cut()
	}
	p.b.workspaces.Forget((*Workspace)(p))
	return nil
}

var (
	_ opsapi.Workspace     = (*Workspace)(nil)
	_ opsapi.OwnerReporter = (*Workspace)(nil)
	_ opsapi.CreationTimer = (*Workspace)(nil)
	_ remote.Transport     = (*podBox)(nil)
)
