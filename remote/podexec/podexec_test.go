package podexec_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/remote/podexec"
)

// pod starts a pod of the workspace image (which the test cluster has
// imported) that only sleeps, and returns Pods for its namespace.
func pod(t *testing.T) (podexec.Pods, string) {
	rc, err := clientcmd.BuildConfigFromFlags("", testutil.RequireKube(t))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := "podexec-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	pods := cs.CoreV1().Pods("default")
	zero := int64(0)
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &zero, Containers: []corev1.Container{{
			Name: "main", Image: "wsbroker/workspace:current", ImagePullPolicy: corev1.PullNever,
			Command: []string{"sleep", "infinity"}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}) })
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not running after 2 minutes: %v %v", name, err, p.Status)
		}
	}
	return podexec.Pods{REST: rc, Client: cs, Namespace: "default"}, name
}

func TestRunOutputInstall(t *testing.T) {
	p, name := pod(t)
	ctx := context.Background()
	out, err := p.Output(ctx, name, "main", []string{"sh", "-c", "read x; echo got $x"}, strings.NewReader("in\n"))
	if err != nil || out != "got in\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}
	_, err = p.Output(ctx, name, "main", []string{"sh", "-c", "echo oops >&2; exit 3"}, nil)
	if err == nil || !strings.Contains(err.Error(), "oops") || !strings.Contains(err.Error(), "in pod "+name) {
		t.Fatalf("a failed command: %v; want its stderr and the pod's name", err)
	}

	local := filepath.Join(t.TempDir(), "tool")
	body := strings.Repeat("#!/bin/sh\necho tool ran\n", 5000) // larger than one stream frame
	if err := os.WriteFile(local, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Install(ctx, name, "main", "main", local, "/tmp/tool-1"); err != nil {
		t.Fatal(err)
	}
	out, err = p.Output(ctx, name, "main", []string{"sh", "-c", `stat -c %a /tmp/tool-1; wc -c < /tmp/tool-1; /tmp/tool-1 | head -1`}, nil)
	if want := "555\n" + "120000\n" + "tool ran\n"; err != nil || out != want {
		t.Fatalf("installed file: %q, %v; want %q", out, err, want)
	}
	// There already: nothing is written (the writer container is never
	// asked, so a wrong one does not matter).
	if err := p.Install(ctx, name, "main", "no-such-container", local, "/tmp/tool-1"); err != nil {
		t.Errorf("a second Install wrote again: %v", err)
	}
	if err := p.Install(ctx, name, "main", "no-such-container", local, "/tmp/tool-2"); err == nil {
		t.Error("Install through a container the pod lacks succeeded")
	}
}
