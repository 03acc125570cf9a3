package kubernetes_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
)

// TestSecureDefaults checks the pod as the API server holds it and as a
// command inside sees it.
func TestSecureDefaults(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, "alice", nil)
	pod, err := clientset(t).CoreV1().Pods(kubernetes.DefaultNamespace).Get(t.Context(), ws.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	psc := s.SecurityContext
	switch {
	case s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken:
		t.Error("the service account token is mounted")
	case s.HostNetwork || s.HostPID || s.HostIPC:
		t.Error("a host namespace is shared")
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 1000:
		t.Errorf("pod security context %+v", psc)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp %+v", psc.SeccompProfile)
	}
	c := s.Containers[0]
	csc := c.SecurityContext
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v", csc)
	}
	if c.Resources.Limits.Memory().Value() != int64(remote.DefaultMemory) || c.Resources.Limits.Cpu().MilliValue() != 1000 {
		t.Errorf("limits %v", c.Resources.Limits)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/.wsbroker" && !m.ReadOnly {
			t.Error("the workspace container can write the agent's volume")
		}
	}
	if len(s.Containers) != 2 {
		t.Fatalf("containers: %d, want the workspace and the agent store", len(s.Containers))
	}
	store := s.Containers[1].SecurityContext
	if store == nil || store.RunAsUser == nil || *store.RunAsUser == 1000 || *store.RunAsUser == 0 ||
		store.AllowPrivilegeEscalation == nil || *store.AllowPrivilegeEscalation ||
		store.ReadOnlyRootFilesystem == nil || !*store.ReadOnlyRootFilesystem ||
		store.Capabilities == nil || len(store.Capabilities.Drop) != 1 || store.Capabilities.Drop[0] != "ALL" {
		t.Errorf("agent store security context %+v", store)
	}
	for _, v := range s.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			t.Errorf("volume %s has no size limit", v.Name)
		}
	}
	if pod.Annotations[kubernetes.AnnotationOwner] != "alice" || pod.Annotations[kubernetes.AnnotationWorkspace] != ws.ID() {
		t.Errorf("annotations %v", pod.Annotations)
	}

	out := sh(t, ws, `id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' ';
		touch /rootfs-write 2>/dev/null && echo rootfs-writable; ls /var/run/secrets/kubernetes.io 2>/dev/null && echo token; pwd`)
	want := "1000\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n/workspace\n"
	if out != want {
		t.Errorf("inside the pod:\n%s\nwant:\n%s", out, want)
	}

	// The agent's binary: the workspace's user runs it, and can neither
	// change, replace nor add to it, nor reach the store's writable
	// mount through /proc (another uid).
	out = sh(t, ws, `cd /.wsbroker; a=$(ls | grep '^agent-' | head -1); test -x "$a" && echo runs
		cp /bin/true x 2>/dev/null && echo added; { echo >> "$a"; } 2>/dev/null && echo changed
		mv "$a" old 2>/dev/null && echo moved; rm -f "$a" 2>/dev/null; test -e "$a" || echo removed
		for p in /proc/[0-9]*; do [ "$(stat -c %u $p)" = 65532 ] && { touch $p/root/.wsbroker/y 2>/dev/null && echo reached || echo store-seen; }; done; true`)
	if out != "runs\nstore-seen\n" {
		t.Errorf("the agent's binary from a command: %q, want it only run (and the store's process seen, not entered)", out)
	}
}

// TestRediscoveryAfterRestart: another backend with the same identity
// finds the workspace with its owner and creation time, and starts a new
// agent in it; files are where they were.
func TestRediscoveryAfterRestart(t *testing.T) {
	b1 := newBackend(t)
	ws := create(t, b1, "bob", nil)
	if err := ws.WriteFile(t.Context(), "kept.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	b1.Close()
	b2 := newBackend(t)
	found, err := b2.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := found[ws.ID()].(*kubernetes.Workspace)
	if !ok {
		t.Fatalf("List did not find %s (found %d)", ws.ID(), len(found))
	}
	if got.Owner() != "bob" || !got.CreatedAt().Equal(ws.CreatedAt()) || got.Root() != "/workspace" {
		t.Errorf("rediscovered: owner %q created %v root %q", got.Owner(), got.CreatedAt(), got.Root())
	}
	if out := sh(t, got, "cat kept.txt"); out != "kept" {
		t.Errorf("file after restart: %q", out)
	}
}

// TestDestroyDeletesThePod, as the API server sees it.
func TestDestroyDeletesThePod(t *testing.T) {
	b := newBackend(t)
	ws := create(t, b, "", nil)
	if err := ws.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	cs := clientset(t)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := cs.CoreV1().Pods(kubernetes.DefaultNamespace).Get(t.Context(), ws.Pod(), metav1.GetOptions{})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod is still there a minute after Destroy")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: "true"}); err == nil {
		t.Error("Exec after Destroy worked")
	}
}

// TestCreateRefusesWhatCannotRun: an image the node does not have (and
// may not pull) fails the create with the kubelet's reason, and leaves
// no pod.
func TestCreateRefusesWhatCannotRun(t *testing.T) {
	b := newBackend(t, func(c *kubernetes.Config) { c.AllowedImages = []string{"*"} })
	id := newID(t)
	_, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: id, Options: json.RawMessage(`{"image":"wsbroker/absent:1"}`)})
	if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("create with an absent image: %v", err)
	}
	found, err := b.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := found[id]; ok {
		t.Error("the failed workspace is still listed")
	}
}

// TestIdleWorkspacesFitANode: pods request little of their node, so more
// idle workspaces than the node has cores (this test cluster: 2) are all
// scheduled; with requests equal to the limits the third stayed Pending.
func TestIdleWorkspacesFitANode(t *testing.T) {
	b := newBackend(t, func(c *kubernetes.Config) { c.StartTimeout = 30 * time.Second })
	for range 4 {
		create(t, b, "", nil)
	}
}
