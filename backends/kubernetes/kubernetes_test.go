package kubernetes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// agentBinary is cmd/wsb-agent, built static by TestMain.
var agentBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wsb-agent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBinary = filepath.Join(dir, "wsb-agent")
	build := exec.Command("go", "build", "-o", agentBinary, "github.com/wsbroker/wsbroker/cmd/wsb-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the agent: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newBackend is a backend on the test cluster that closes with the test;
// it skips (fails under CI) without a cluster.
func newBackend(t testing.TB, opts ...func(*kubernetes.Config)) *kubernetes.Backend {
	t.Helper()
	b, err := kubernetesNew(t, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kubernetesNew is New on the test cluster with the tests' settings and
// opts; what it makes closes with the test.
func kubernetesNew(t testing.TB, opts ...func(*kubernetes.Config)) (*kubernetes.Backend, error) {
	t.Helper()
	cfg := kubernetes.NewConfig()
	cfg.Kubeconfig = testutil.RequireKube(t)
	cfg.Identity = testutil.BrokerIdentity
	cfg.AgentBinary = agentBinary
	cfg.ImagePullPolicy = "Never"
	cfg.KillGrace = 500 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	b, err := kubernetes.New(cfg, testutil.Logger(t))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { b.Close() })
	return b, nil
}

// clientset is the tests' own view of the cluster.
func clientset(t testing.TB) k8s.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", testutil.RequireKube(t))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// newID is a workspace ID unique to this run.
func newID(t testing.TB) string {
	b := make([]byte, 4)
	rand.Read(b)
	name := strings.Trim(unsafeID.ReplaceAllString(t.Name(), "-"), "-._")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return "t-" + strings.TrimLeft(name, "-._") + "-" + hex.EncodeToString(b)
}

// create makes a workspace with options (nil: defaults), destroyed when
// the test ends.
func create(t testing.TB, b *kubernetes.Backend, owner string, options any) *kubernetes.Workspace {
	t.Helper()
	var raw json.RawMessage
	if options != nil {
		raw, _ = json.Marshal(options)
	}
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Options: raw, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return ws.(*kubernetes.Workspace)
}

// sh runs command in ws and returns its output; a non-zero exit fails.
func sh(t testing.TB, ws opsapi.BashOperations, command string) string {
	t.Helper()
	var out strings.Builder
	res, err := ws.Exec(t.Context(), opsapi.ExecRequest{Command: command, Output: &out})
	if err != nil {
		t.Fatalf("%q: %v", command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d: %s", command, res.ExitCode, out.String())
	}
	return out.String()
}

// TestConformance runs the shared suite, one fresh pod per case.
func TestConformance(t *testing.T) {
	b := newBackend(t)
	backendtest.Run(t, backendtest.Options{Confined: false, New: func(t *testing.T) opsapi.Workspace {
		return create(t, b, "", nil)
	}})
}

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
	if c.Resources.Limits.Memory().Value() != int64(kubernetes.DefaultMemory) || c.Resources.Limits.Cpu().MilliValue() != 1000 {
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
