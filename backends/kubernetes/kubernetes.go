package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/podexec"
)

// Labels and annotations on every pod the backend makes. Labels select
// (a label value is at most 63 characters); annotations hold what may be
// longer, the workspace id among them.
const (
	LabelManaged        = "wsbroker.managed"    // "1"
	LabelBroker         = "wsbroker.broker"     // Config.Identity
	AnnotationWorkspace = "wsbroker/workspace"  // the workspace id
	AnnotationCreatedAt = "wsbroker/created-at" // RFC 3339, UTC
	AnnotationRoot      = "wsbroker/root"       // the workspace directory
	AnnotationOwner     = "wsbroker/owner"      // the owning tenant
)

// What a workspace pod requests of its node (at most its limits): enough
// for an idle shell and its agent.
const (
	requestCPUMilli = 50
	requestMemory   = 64 << 20
)

// What the agent store container may use: enough to copy the agent in.
const (
	storeCPUMilli = 200
	storeMemory   = 64 << 20
)

// namePrefix starts every pod's name.
const namePrefix = "wsbroker-"

// Backend creates workspaces as pods of one namespace.
type Backend struct {
	cfg    Config
	pods   podexec.Pods // commands in the pods
	cs     kubernetes.Interface
	logger *slog.Logger
	agent  remote.AgentBinary

	workspaces remote.Table[*Workspace]

	pools pools
}

// New checks cfg (zero fields take NewConfig's defaults), connects to the
// cluster, finds the agent binary and, with network "none", makes sure
// the namespace's deny-all NetworkPolicy for the broker's pods exists. A
// cluster that does not answer is ErrUnavailable.
func New(cfg Config, logger *slog.Logger) (*Backend, error) {
	const op = "kubernetes.New"
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, opsapi.E(op, "", opsapi.ErrInvalid, err)
	}
	logger = remote.BackendLogger(logger, "kubernetes")
	// client-go reports through klog, a process-wide logger that writes
	// its own format to stderr. What it says here is the noise of exec
	// streams ended on purpose (a closed agent, a deleted pod); every
	// failure that matters comes back as an error, logged with its
	// workspace. It cannot be routed to this backend's logger: klog
	// outlives a backend, and its goroutines log after the caller (a
	// test) has gone.
	quietKlog.Do(func() { klog.SetLogger(logr.Discard()) })
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, opsapi.E(op, cfg.Kubeconfig, opsapi.ErrInvalid, err)
	}
	// client-go's default of 5 requests a second would queue a busy
	// broker's creates and execs behind each other.
	rc.QPS, rc.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, opsapi.E(op, cfg.Kubeconfig, opsapi.ErrInvalid, err)
	}
	b := &Backend{cfg: cfg, pods: podexec.Pods{REST: rc, Client: cs, Namespace: cfg.Namespace}, cs: cs, logger: logger}
	if b.agent, err = remote.FindAgent(cfg.AgentBinary); err != nil {
		return nil, opsapi.E(op, cfg.AgentBinary, opsapi.ErrInvalid, fmt.Errorf("the in-box agent is required: %w", err))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ver, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, opsapi.E(op, rc.Host, opsapi.ErrUnavailable, err)
	}
	if cfg.Network == NetworkNone {
		if err := b.ensureDenyAll(ctx); err != nil {
			return nil, opsapi.E(op, cfg.Namespace, opsapi.ErrUnavailable, fmt.Errorf("the deny-all network policy: %w", err))
		}
	} else {
		logger.Warn("workspace pods are on the cluster's network", "network", cfg.Network)
	}
	if err := b.setupPools(); err != nil {
		return nil, opsapi.E(op, "", opsapi.ErrInvalid, err)
	}
	logger.Info("kubernetes cluster", "server", rc.Host, "version", ver.GitVersion, "namespace", cfg.Namespace, "agent", b.agent.Path,
		"pools", len(b.pools.list))
	return b, nil
}

// quietKlog sets klog's logger once: setting it races with the streams of
// a backend already running.
var quietKlog sync.Once

// restConfig is the kubeconfig file's configuration, or the in-cluster
// one when path is empty.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// Name is the backend's registry name.
func (b *Backend) Name() string { return "kubernetes" }

// selector picks this broker's pods (and its claims and leases).
func (b *Backend) selector() map[string]string {
	return map[string]string{LabelManaged: "1", LabelBroker: b.cfg.Identity}
}

// selectorOf is the label selector of set.
func selectorOf(set map[string]string) string { return labels.SelectorFromSet(set).String() }

// ensureDenyAll makes (or leaves) the NetworkPolicy that gives this
// broker's pods no ingress and no egress. It holds only where the
// cluster's network plugin enforces NetworkPolicy.
func (b *Backend) ensureDenyAll(ctx context.Context) error {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: namePrefix + "deny-all-" + b.cfg.Identity, Labels: b.selector()},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: b.selector()},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// validID: what the broker's ids look like; the pod's name is a hash of
// it, so any such id fits.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// podName is workspace id's pod: a DNS label, which ids need not be.
func podName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return namePrefix + hex.EncodeToString(sum[:10])
}

// createOptions are the options Create accepts.
type createOptions struct {
	Image  string        `json:"image"`
	Limits *createLimits `json:"limits"`
}

type createLimits struct {
	Memory ByteSize `json:"memory"`
	CPUs   float64  `json:"cpus"`
	Disk   ByteSize `json:"disk"`
}

// spec is a workspace pod's settings after options and configuration.
// Two creates with equal specs make the same pod, so a warm pool's
// member fits a create whose spec is the pool's.
type spec struct {
	image  string
	memory int64
	cpus   float64
	disk   int64
}

// resolve decodes a create request's options strictly and checks them.
func (b *Backend) resolve(options json.RawMessage) (spec, error) {
	var o createOptions
	if err := remote.DecodeOptions(options, &o); err != nil {
		return spec{}, err
	}
	return b.check(o)
}

// check applies options to the configuration: an image not allowed, or
// limits above the configured ones, are errors.
func (b *Backend) check(o createOptions) (spec, error) {
	c := b.cfg
	image, err := c.Image(o.Image)
	s := spec{image: image, memory: int64(c.Memory), cpus: c.CPUs, disk: int64(c.Disk)}
	errs := []error{err}
	if l := o.Limits; l != nil {
		if l.Memory != 0 {
			if l.Memory < 16<<20 || l.Memory > c.Memory || l.Memory <= c.TmpfsSize {
				errs = append(errs, fmt.Errorf("limits.memory %d must be between 16 MiB (and above tmpfsSize) and %d", l.Memory, c.Memory))
			}
			s.memory = int64(l.Memory)
		}
		errs = append(errs, remote.Lower("limits.cpus", l.CPUs, 0.01, &s.cpus), remote.Lower("limits.disk", int64(l.Disk), 8<<20, &s.disk))
	}
	return s, errors.Join(errs...)
}

// Create makes the workspace's pod, waits until it runs, and starts its
// agent. Bad options are ErrInvalid, an existing id ErrExist, a cluster
// that does not answer ErrUnavailable. A pod that cannot start (an image
// that is not there, a node that refuses it) is removed, and the error
// says why.
func (b *Backend) Create(ctx context.Context, ws opsapi.WorkspaceSpec) (opsapi.Workspace, error) {
	const op = "kubernetes.Create"
	if !validID.MatchString(ws.ID) {
		return nil, opsapi.E(op, ws.ID, opsapi.ErrInvalid, fmt.Errorf("invalid workspace id %q", ws.ID))
	}
	s, err := b.resolve(ws.Options)
	if err != nil {
		return nil, opsapi.E(op, ws.ID, opsapi.ErrInvalid, err)
	}
	if err := b.usable(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	if p := b.poolFor(s); p != nil {
		if m, ok := b.pools.set.Take(p.members); ok {
			w, err := b.claim(ctx, op, ws, p, m)
			switch {
			case err == nil:
				return w, nil
			case errors.Is(err, opsapi.ErrExist) || ctx.Err() != nil:
				return nil, err
			}
			b.logger.Warn("a pool member could not be claimed; making a pod", "workspace", ws.ID, "err", err)
		}
	}
	created := time.Now().UTC()
	pod := b.podSpec(metav1.ObjectMeta{Name: podName(ws.ID), Labels: b.selector(),
		Annotations: b.workspaceAnnotations(ws, created)}, s)
	if _, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, opsapi.E(op, ws.ID, opsapi.ErrExist, errors.New("workspace exists"))
		}
		return nil, apiErr(op, ws.ID, err)
	}
	// A claim of this id from a warm pool (pool.go) may have come first;
	// its workspace may be in the table, so the pod goes by name.
	if _, err := b.cs.CoreV1().ConfigMaps(b.cfg.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if derr := b.deletePod(dctx, pod.Name); derr != nil {
			b.logger.Warn("a refused create's pod could not be deleted", "pod", pod.Name, "err", derr)
		}
		cancel()
		if err == nil {
			return nil, opsapi.E(op, ws.ID, opsapi.ErrExist, errors.New("workspace exists (claimed from a warm pool)"))
		}
		return nil, apiErr(op, ws.ID, err)
	}
	w := b.adopt(ws.ID, pod.Name, ws.Owner, b.cfg.WorkspaceDir, created, s.memory, storeContainerName)
	if err := b.start(ctx, w, "its create failed"); err != nil {
		return nil, opsapi.E(op, ws.ID, nil, err)
	}
	w.Logger().Info("workspace created", "image", s.image, "memory", ByteSize(s.memory), "cpus", s.cpus,
		"disk", ByteSize(s.disk))
	return w, nil
}

// start waits until w's pod runs and starts its agent. A workspace that
// does not get there is removed, for reason.
func (b *Backend) start(ctx context.Context, w *Workspace, reason string) error {
	err := b.waitRunning(ctx, w.pod)
	if err == nil {
		_, err = w.Agent(ctx)
	}
	if err != nil {
		w.Discard(reason)
	}
	return err
}

// deletePod deletes pod name with no grace period, so every process in
// it is killed at once; a pod already gone is no error.
func (b *Backend) deletePod(ctx context.Context, name string) error {
	grace := int64(0)
	err := b.cs.CoreV1().Pods(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// waitRunning waits until every container of pod runs, failing early
// with the kubelet's reason when it cannot start.
func (b *Backend) waitRunning(ctx context.Context, name string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pod, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return apiErr("kubernetes.wait", name, err)
		}
		if why := startFailure(pod); why != "" {
			return opsapi.E("kubernetes.wait", name, opsapi.ErrInvalid, errors.New(why))
		}
		running := 0
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Running != nil {
				running++
			}
		}
		if running > 0 && running == len(pod.Spec.Containers) {
			return nil
		}
		select {
		case <-ctx.Done():
			return opsapi.E("kubernetes.wait", name, opsapi.ErrUnavailable,
				fmt.Errorf("pod not running (phase %s): %w", pod.Status.Phase, ctx.Err()))
		case <-tick.C:
		}
	}
}

// startFailure is why pod can never start, "" while it may.
func startFailure(pod *corev1.Pod) string {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return fmt.Sprintf("pod %s: %s", pod.Status.Phase, pod.Status.Message)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
				"CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return fmt.Sprintf("container cannot start: %s: %s", w.Reason, w.Message)
			}
		}
	}
	return ""
}

// workspaceAnnotations are the facts of workspace ws kept on its pod.
func (b *Backend) workspaceAnnotations(ws opsapi.WorkspaceSpec, created time.Time) map[string]string {
	a := map[string]string{
		AnnotationWorkspace: ws.ID,
		AnnotationCreatedAt: created.Format(time.RFC3339Nano),
		AnnotationRoot:      b.cfg.WorkspaceDir,
	}
	if ws.Owner != "" {
		a[AnnotationOwner] = ws.Owner
	}
	return a
}

// podSpec is a hardened pod with settings s: a workspace's, or a warm
// pool member's.
func (b *Backend) podSpec(meta metav1.ObjectMeta, s spec) *corev1.Pod {
	c := b.cfg
	uid, gid, _ := numericUser(c.User)
	yes, no := true, false
	var runtimeClass *string
	if c.RuntimeClassName != "" {
		runtimeClass = &c.RuntimeClassName
	}
	grace := int64(0)
	sized := func(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }
	return &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			// The pause container is then PID 1 of the pod and reaps
			// orphans (an agent's reapers outliving it); the workspace
			// container's own first process only sleeps.
			ShareProcessNamespace:         &yes,
			EnableServiceLinks:            &no,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			RuntimeClassName:              runtimeClass,
			NodeSelector:                  c.NodeSelector,
			Hostname:                      "workspace",
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				FSGroup:        &gid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           s.image,
				ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy),
				// The main process only has to live; the agent is
				// started beside it over exec.
				Command:         []string{"sleep", "infinity"},
				WorkingDir:      c.WorkspaceDir,
				Env:             []corev1.EnvVar{{Name: "LANG", Value: "C.UTF-8"}, {Name: "TERM", Value: "dumb"}},
				SecurityContext: hardened(nil, nil),
				// Requests default to the limits when only limits are
				// given: each idle workspace would then hold a whole
				// CPU and its full memory on the node, and the third
				// pod on a 2-core node would never be scheduled. A
				// workspace mostly waits for its agent: request little,
				// limit as configured.
				Resources: resources(int64(s.cpus*1000), s.memory, min(int64(s.cpus*1000), requestCPUMilli), min(s.memory, requestMemory)),
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: c.WorkspaceDir},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "agent", MountPath: agentDir, ReadOnly: true},
				},
			}, b.storeContainer(s.image, gid)},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sized(s.disk)}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: sized(int64(c.TmpfsSize))}}},
				{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sized(agentDirSize)}}},
			},
		},
	}
}

// storeContainer is the pod's agent store: it only sleeps, and the broker
// copies the agent's binary in through it, as a user other than the
// workspace's, into the volume the workspace container mounts read-only.
func (b *Backend) storeContainer(image string, gid int64) corev1.Container {
	uid, _, _ := numericUser(b.cfg.User)
	store := storeUID(uid)
	return corev1.Container{
		Name:            storeContainerName,
		Image:           image,
		ImagePullPolicy: corev1.PullPolicy(b.cfg.ImagePullPolicy),
		Command:         []string{"sleep", "infinity"},
		SecurityContext: hardened(&store, &gid),
		Resources:       resources(storeCPUMilli, storeMemory, storeCPUMilli/10, storeMemory/4),
		VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: agentDir}},
	}
}

// hardened is a container's security context: no privilege, no
// capability, a read-only root filesystem; uid and gid when given.
func hardened(uid, gid *int64) *corev1.SecurityContext {
	no, yes := false, true
	return &corev1.SecurityContext{RunAsUser: uid, RunAsGroup: gid, AllowPrivilegeEscalation: &no, Privileged: &no,
		ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// resources are a container's limits and requests, in millicores and
// bytes.
func resources(cpuMilli, memory, requestCPUMilli, requestMemory int64) corev1.ResourceRequirements {
	list := func(cpu, mem int64) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)}
	}
	return corev1.ResourceRequirements{Limits: list(cpuMilli, memory), Requests: list(requestCPUMilli, requestMemory)}
}

// adopt returns the backend's Workspace for id, making it when new.
func (b *Backend) adopt(id, pod, owner, root string, created time.Time, memory int64, store string) *Workspace {
	return b.workspaces.Adopt(id, nil, func() *Workspace { return newWorkspace(b, id, pod, owner, root, created, memory, store) })
}

func (b *Backend) usable() error { return b.workspaces.Usable("kubernetes") }

// List finds this broker's workspace pods (its identity label) after a
// restart, from their annotations. Pods being deleted are left out.
func (b *Backend) List(ctx context.Context) (map[string]opsapi.Workspace, error) {
	const op = "kubernetes.List"
	if err := b.usable(); err != nil {
		return nil, err
	}
	pods, err := b.cs.CoreV1().Pods(b.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(b.selector()).String()})
	if err != nil {
		return nil, apiErr(op, "", err)
	}
	var claims map[string]string
	for _, p := range pods.Items {
		if p.Labels[LabelClaimed] == "1" && claims == nil {
			if claims, err = b.claimedPods(ctx); err != nil {
				return nil, apiErr(op, "", err)
			}
		}
	}
	out := map[string]opsapi.Workspace{}
	for i := range pods.Items {
		if w, ok := b.adoptPod(&pods.Items[i], claims); ok {
			out[w.ID()] = w
		}
	}
	return out, nil
}

// Find returns workspace id when its pod is in the namespace with this
// broker's identity though this broker did not make or list it: another
// replica made it (opsapi.Finder). A pod being deleted is not found.
func (b *Backend) Find(ctx context.Context, id string) (opsapi.Workspace, error) {
	const op = "kubernetes.Find"
	if !validID.MatchString(id) {
		return nil, opsapi.E(op, id, opsapi.ErrNotExist, errors.New("not a workspace id"))
	}
	if err := b.usable(); err != nil {
		return nil, err
	}
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	p, err := pods.Get(ctx, podName(id), metav1.GetOptions{})
	var claims map[string]string
	if apierrors.IsNotFound(err) {
		// Claimed from a warm pool: the claim names the pod.
		cm, cerr := b.cs.CoreV1().ConfigMaps(b.cfg.Namespace).Get(ctx, podName(id), metav1.GetOptions{})
		if cerr != nil {
			return nil, apiErr(op, id, cerr)
		}
		member, ok := claimOf(cm)
		if !ok {
			return nil, apiErr(op, id, err)
		}
		claims = map[string]string{cm.Name: member}
		p, err = pods.Get(ctx, member, metav1.GetOptions{})
	}
	if err != nil {
		return nil, apiErr(op, id, err)
	}
	w, ok := b.adoptPod(p, claims)
	if !ok || w.ID() != id {
		return nil, opsapi.E(op, id, opsapi.ErrNotExist, errors.New("no workspace pod of this broker has this id"))
	}
	return w, nil
}

// adoptPod is the workspace of pod p when p is one of this broker's
// workspace pods (labels and annotations), and not being deleted. A pod
// not named for its workspace is one only when its claim, in claims,
// names it.
func (b *Backend) adoptPod(p *corev1.Pod, claims map[string]string) (*Workspace, bool) {
	id := p.Annotations[AnnotationWorkspace]
	for k, v := range b.selector() {
		if p.Labels[k] != v {
			return nil, false
		}
	}
	if !validID.MatchString(id) || p.DeletionTimestamp != nil {
		return nil, false
	}
	if claimed(p.Name, id) && (p.Labels[LabelClaimed] != "1" || claims[podName(id)] != p.Name) {
		return nil, false
	}
	created, err := time.Parse(time.RFC3339Nano, p.Annotations[AnnotationCreatedAt])
	if err != nil {
		created = p.CreationTimestamp.UTC()
	}
	root := p.Annotations[AnnotationRoot]
	if !path.IsAbs(root) || path.Clean(root) != root || opsapi.Within("/proc", root) {
		root = b.cfg.WorkspaceDir
	}
	var memory int64
	store := containerName // a pod made before the agent store: its agent volume is the workspace's
	for _, c := range p.Spec.Containers {
		switch c.Name {
		case containerName:
			memory = c.Resources.Limits.Memory().Value()
		case storeContainerName:
			store = c.Name
		}
	}
	return b.adopt(id, p.Name, p.Annotations[AnnotationOwner], root, created, memory, store), true
}

// Ping asks the API server for its version (opsapi.Pinger).
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.cs.CoreV1().Namespaces().Get(ctx, b.cfg.Namespace, metav1.GetOptions{}); err != nil {
		return apiErr("kubernetes.Ping", b.cfg.Namespace, err)
	}
	return nil
}

// Close ends every agent connection and removes the warm pools' ready
// members. Workspaces (pods) stay.
func (b *Backend) Close() error {
	ws, ok := b.workspaces.Close()
	if !ok {
		return nil
	}
	b.closePools()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.CloseAgent)
	}
	wg.Wait()
	return nil
}

// apiErr classifies an error of the API server.
func apiErr(op, p string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return opsapi.E(op, p, opsapi.ErrNotExist, err)
	case apierrors.IsAlreadyExists(err):
		return opsapi.E(op, p, opsapi.ErrExist, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
		return opsapi.E(op, p, opsapi.ErrInvalid, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return opsapi.E(op, p, nil, err)
	default:
		return opsapi.E(op, p, opsapi.ErrUnavailable, err)
	}
}

var (
	_ opsapi.Backend      = (*Backend)(nil)
	_ opsapi.Rediscoverer = (*Backend)(nil)
	_ opsapi.Pinger       = (*Backend)(nil)
	_ opsapi.Finder       = (*Backend)(nil)
)
