package podexec

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/wsbroker/wsbroker/internal/execpump"
)

// Pods runs commands in the pods of one namespace.
type Pods struct {
	REST      *rest.Config // the API server and the credentials
	Client    kubernetes.Interface
	Namespace string
}

// Run runs argv in container of pod, with stdin, stdout and stderr as
// given (nil: not attached), until it ends or ctx does. A non-zero exit
// is an error that says so.
func (p Pods) Run(ctx context.Context, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := p.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container,
		Command:   argv,
		Stdin:     stdin != nil,
		Stdout:    stdout != nil,
		Stderr:    stderr != nil,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(p.REST, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.REST, "POST", req.URL())
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

// Output runs argv in container with stdin (nil: none) and returns its
// stdout; the head of its stderr is in the error of a failed run.
func (p Pods) Output(ctx context.Context, pod, container string, argv []string, stdin io.Reader) (string, error) {
	var out strings.Builder
	stderr := &execpump.Head{Max: 4096}
	if err := p.Run(ctx, pod, container, argv, stdin, &out, stderr); err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// installScript copies stdin to $1, made readable and executable by all
// and writable by none, and says how many bytes arrived. The shell stays
// alive, its stdout open, until the copy is done: the container runtime
// stops passing stdin to a process that closed its stdout, which would
// cut the file short with no error.
const installScript = `set -e
t="$1.tmp.$$"
cat > "$t"
chmod 0555 "$t"
mv -f "$t" "$1"
echo "copied $(wc -c < "$1")"`

// Install copies the local file to dst in pod unless an executable file
// of its size is there as container sees it (name dst by the file's
// content hash), checking that every byte arrived. writer is the
// container that writes it: container itself, or another that shares the
// volume and may write where container may not. The check is an exec of
// its own: a process that exits while its stdin is still being sent
// leaves the stream waiting. Both containers need /bin/sh, wc, cat,
// chmod and mv.
func (p Pods) Install(ctx context.Context, pod, container, writer, local, dst string) error {
	fi, err := os.Stat(local)
	if err != nil {
		return err
	}
	size := strconv.FormatInt(fi.Size(), 10)
	have, err := p.Output(ctx, pod, container, []string{"/bin/sh", "-c", `[ -x "$1" ] && wc -c < "$1" || true`, "sh", dst}, nil)
	if err != nil {
		return fmt.Errorf("looking for %s in the pod: %w", dst, err)
	}
	if strings.TrimSpace(have) == size {
		return nil
	}
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := p.Output(ctx, pod, writer, []string{"/bin/sh", "-c", installScript, "sh", dst}, f)
	if err != nil {
		return fmt.Errorf("copying %s into the pod: %w", dst, err)
	}
	if got := strings.TrimSpace(out); got != "copied "+size {
		return fmt.Errorf("copying %s into the pod: %q, want %s bytes", dst, got, size)
	}
	return nil
}
