package testutil

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// defaultDockerSocket is where Debian's docker.io (and most engines) listen.
const defaultDockerSocket = "/var/run/docker.sock"

// RequireDocker skips (fails under CI) unless a docker engine answers:
// GET /_ping over its unix socket (DOCKER_HOST=unix://..., or
// /var/run/docker.sock), or `docker version` for any other DOCKER_HOST.
func RequireDocker(t testing.TB) {
	t.Helper()
	if err := dockerPing(); err != nil {
		SkipOrFail(t, "needs a docker engine: "+err.Error())
	}
}

// RequireImage skips (fails under CI) unless the engine answers and holds
// the image ref locally (nothing is pulled; this project builds its images
// offline with images/<name>/build.sh).
func RequireImage(t testing.TB, ref string) {
	t.Helper()
	RequireDocker(t)
	ok, err := dockerImageExists(ref)
	switch {
	case err != nil:
		SkipOrFail(t, fmt.Sprintf("needs docker image %s: %v", ref, err))
	case !ok:
		SkipOrFail(t, fmt.Sprintf("needs docker image %s; build it with %s", ref, imageBuildHint(ref)))
	}
}

// imageBuildHint names the build script of one of this project's images.
func imageBuildHint(ref string) string {
	name, ok := strings.CutPrefix(ref, "wsbroker/")
	if !ok {
		return "docker build or docker load"
	}
	name, _, _ = strings.Cut(name, ":")
	name, _, _ = strings.Cut(name, "@")
	return "images/" + name + "/build.sh"
}

// dockerSocket returns the engine's unix socket path, or "" when DOCKER_HOST
// points elsewhere (tcp, ssh) and only the CLI knows how to get there.
func dockerSocket() string {
	h := os.Getenv("DOCKER_HOST")
	if h == "" {
		return defaultDockerSocket
	}
	if p, ok := strings.CutPrefix(h, "unix://"); ok {
		return p
	}
	return ""
}

// dockerGet does one GET against the engine's API over its unix socket.
func dockerGet(sock, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
	// The host part is ignored by the dialer; the engine wants some host.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body), err
}

func dockerPing() error {
	sock := dockerSocket()
	if sock == "" {
		return dockerCLI("version", "--format", "{{.Server.Version}}")
	}
	if _, err := os.Stat(sock); err != nil {
		return fmt.Errorf("no engine socket: %w", err)
	}
	code, body, err := dockerGet(sock, "/_ping")
	if err != nil {
		return fmt.Errorf("ping %s: %w", sock, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("ping %s: status %d: %s", sock, code, strings.TrimSpace(body))
	}
	return nil
}

func dockerImageExists(ref string) (bool, error) {
	sock := dockerSocket()
	if sock == "" {
		if err := dockerCLI("image", "inspect", ref); err != nil {
			if strings.Contains(err.Error(), "No such image") {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	// The API's image name may hold slashes; only the rest must be escaped.
	code, body, err := dockerGet(sock, "/images/"+(&url.URL{Path: ref}).EscapedPath()+"/json")
	switch {
	case err != nil:
		return false, err
	case code == http.StatusOK:
		return true, nil
	case code == http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("inspect: status %d: %s", code, strings.TrimSpace(body))
	}
}

// dockerCLI runs the docker CLI quietly, with a bound so a wedged engine
// cannot hang a test.
func dockerCLI(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// BrokerIdentity is this test process's docker backend identity: test
// packages sharing one engine at once never adopt, expire or remove each
// other's workspaces, as two brokers would not.
var BrokerIdentity = "test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
