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

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
