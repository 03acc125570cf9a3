// Command execbench measures the test cluster the way the kubernetes backend
// will use it: a pod created from a local image (imagePullPolicy Never) to
// Running, one exec over pods/exec (client-go's remotecommand: WebSocket,
// falling back to SPDY), and bytes streamed into a pod over an exec's stdin.
//
//	execbench -kubeconfig DIR/kubeconfig -image IMAGE [-execs 20] [-stdin-mib 1]
//
// It creates one pod (named execbench-<pid>), reports, and deletes it. Its own
// module: client-go stays out of the broker's go.mod until the backend needs it.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

type bench struct {
	cs   *kubernetes.Clientset
	cfg  *rest.Config
	ns   string
	name string
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	image := flag.String("image", "", "image already in the node's containerd (pods use imagePullPolicy Never)")
	ns := flag.String("namespace", "default", "namespace of the pod")
	execs := flag.Int("execs", 20, "execs of `true` to time")
	stdinMiB := flag.Int("stdin-mib", 1, "MiB to stream into the pod over stdin in the trap check (0: skip)")
	command := flag.String("command", "sleep infinity", "the pod's command (sh -c); empty: the image's own entrypoint and no exec (e.g. the pause image)")
	flag.Parse()
	if *image == "" || *kubeconfig == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	check(err)
	b := &bench{cs: cs, cfg: cfg, ns: *ns, name: fmt.Sprintf("execbench-%d", os.Getpid())}
	ctx := context.Background()

	// Pod create to Running, watched (no polling interval in the number).
	start := time.Now()
	created := start
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: b.name},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "main", Image: *image, ImagePullPolicy: corev1.PullNever}},
			AutomountServiceAccountToken:  new(bool),
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if *command != "" {
		pod.Spec.Containers[0].Command = []string{"sh", "-c", *command}
	}
	w, err := cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", b.name).String()})
	check(err)
	_, err = cs.CoreV1().Pods(b.ns).Create(ctx, pod, metav1.CreateOptions{})
	check(err)
	// Deleted on every exit, a failed one included (check calls cleanup).
	cleanup = func() {
		_ = cs.CoreV1().Pods(b.ns).Delete(context.Background(), b.name, metav1.DeleteOptions{})
	}
	defer cleanup()
	timeout := time.After(120 * time.Second)
wait:
	for {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if p.Status.Phase == corev1.PodRunning {
				break wait
			}
			if p.Status.Phase == corev1.PodFailed {
				check(fmt.Errorf("pod failed: %+v", p.Status))
			}
		case <-timeout:
			check(fmt.Errorf("pod not Running after 120 s"))
		}
	}
	w.Stop()
	fmt.Printf("pod create to Running: %v\n", time.Since(start).Round(time.Millisecond))
	if *command == "" {
		return
	}

	// The first exec pays for connection setup; the rest are steady state.
	start = time.Now()
	_, _, err = b.exec(ctx, nil, "true")
	check(err)
	fmt.Printf("first exec: %v (pod create to first exec done: %v)\n", time.Since(start).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	var ds []time.Duration
	for range *execs {
		t := time.Now()
		_, _, err := b.exec(ctx, nil, "true")
		check(err)
		ds = append(ds, time.Since(t))
	}
	if len(ds) > 0 {
		slices.Sort(ds)
		fmt.Printf("exec true x%d: min %v p50 %v max %v\n", len(ds), ds[0].Round(time.Millisecond/10),
			ds[len(ds)/2].Round(time.Millisecond/10), ds[len(ds)-1].Round(time.Millisecond/10))
	}

	if *stdinMiB > 0 {
		data := make([]byte, *stdinMiB<<20)
		_, _ = rand.Read(data)
		sum := sha256.Sum256(data)
		want := hex.EncodeToString(sum[:])
		// The trap: with `exec cat > f` the process's stdout is the file,
		// so the exec's stdout pipe closes at once, and containerd's CRI
		// exec stops copying stdin then. A shell that stays in front keeps
		// stdout open until cat ends.
		for _, c := range []struct{ label, script string }{
			{"stdout closed at once: sh -c 'exec cat > f'", "exec cat > /tmp/execbench.in"},
			{"stdout kept open:      sh -c 'cat > f'     ", "cat > /tmp/execbench.in"},
		} {
			t := time.Now()
			_, stderr, err := b.exec(ctx, bytes.NewReader(data), "sh", "-c", c.script)
			el := time.Since(t)
			out, _, err2 := b.exec(ctx, nil, "sh", "-c", "wc -c < /tmp/execbench.in; sha256sum < /tmp/execbench.in")
			check(err2)
			f := strings.Fields(out)
			got := "?"
			if len(f) >= 2 {
				got = f[0]
			}
			verdict := "WHOLE"
			if len(f) < 2 || f[1] != want {
				verdict = "TRUNCATED"
			}
			fmt.Printf("stdin %d MiB, %s: exit err=%v, %s bytes arrived of %d: %s (%v)%s\n", *stdinMiB, c.label, err, got, len(data), verdict, el.Round(time.Millisecond), stderr)
		}
	}
}

// exec runs argv in the pod's container and returns its stdout and stderr.
func (b *bench) exec(ctx context.Context, stdin io.Reader, argv ...string) (string, string, error) {
	req := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.ns).Name(b.name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "main", Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.cfg, "POST", req.URL().String())
	if err != nil {
		return "", "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.cfg, "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", err
	}
	var out, errb bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), err
}

// cleanup deletes the pod once it exists.
var cleanup = func() {}

func check(err error) {
	if err != nil {
		cleanup()
		log.Fatal(err)
	}
}
