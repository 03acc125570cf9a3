package docker_test

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

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// testImage is the workspace image (images/workspace/build.sh).
const testImage = docker.DefaultImage

// sftpBinary is cmd/wsb-agent, built static by TestMain.
var sftpBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wsb-agent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sftpBinary = filepath.Join(dir, docker.SFTPServerName)
	build := exec.Command("go", "build", "-o", sftpBinary, "github.com/wsbroker/wsbroker/cmd/wsb-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building wsb-agent: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newBackend returns a backend over the local engine, with the test's
// SFTP server binary, that closes with the test. It skips (fails in CI)
// without an engine or the workspace image.
func newBackend(t testing.TB, opts ...func(*docker.Config)) *docker.Backend {
	t.Helper()
	testutil.RequireDocker(t)
	testutil.RequireImage(t, testImage)
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.AgentBinary = sftpBinary
	cfg.KillGrace = 500 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	b, err := docker.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// newID is a workspace ID unique to this run, readable in `docker ps`.
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
func create(t testing.TB, b *docker.Backend, options any) *docker.Workspace {
	t.Helper()
	var raw json.RawMessage
	if options != nil {
		raw, _ = json.Marshal(options)
	}
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: newID(t), Options: raw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // t.Context is canceled before cleanups run
		if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return ws.(*docker.Workspace)
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

// dockerCLI runs the docker command line (the tests' independent view of
// the engine) and returns its trimmed output.
func dockerCLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
