package kubernetes

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/wsbroker/wsbroker/internal/execpump"
)

// The containers of every pod: the workspace's, where the agent and its
// commands run, and the agent store's, the only one that may write the
// agent's binary (agent.go).
const (
	containerName      = "workspace"
	storeContainerName = "agent-store"
)

// podExec runs argv in container of pod over pods/exec, with stdin,
// stdout and stderr as given (nil: not attached), until it ends or ctx
// does. WebSocket first, SPDY when the API server cannot upgrade to it
// (as kubectl does). A non-zero exit is an error that says so.
func (b *Backend) podExec(ctx context.Context, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.cfg.Namespace).Name(pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container,
		Command:   argv,
		Stdin:     stdin != nil,
		Stdout:    stdout != nil,
		Stderr:    stderr != nil,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}); err != nil {
		return fmt.Errorf("exec %s in pod %s: %w", strings.Join(argv, " "), pod, err)
	}
	return nil
}

// podOutput runs argv in container with stdin (nil: none) and returns its
// stdout; the head of its stderr is in the error of a failed run.
func (b *Backend) podOutput(ctx context.Context, pod, container string, argv []string, stdin io.Reader) (string, error) {
	var out strings.Builder
	stderr := &execpump.Head{Max: 4096}
	if err := b.podExec(ctx, pod, container, argv, stdin, &out, stderr); err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}
