package readme

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// repoRoot is the module root, where README.md and docs/ are.
const repoRoot = "../.."

// readmeAddr is the address the README's commands use.
const readmeAddr = "127.0.0.1:8722"

// binDir holds bin/broker and bin/wsb-agent, built as make build does.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "broker-readme-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = filepath.Join(dir, "bin")
	for _, b := range []struct {
		out, pkg string
		env      []string
	}{
		{"broker", "./cmd/broker", nil},
		{"wsb-agent", "./cmd/wsb-agent", []string{"CGO_ENABLED=0"}},
	} {
		build := exec.Command("go", "build", "-o", filepath.Join(binDir, b.out), b.pkg)
		build.Dir = repoRoot
		build.Env = append(os.Environ(), b.env...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", b.pkg, err)
			return 1
		}
	}
	return m.Run()
}

// TestREADMEOnLocal runs the README's CLI and curl blocks against
// `./bin/broker serve`.
func TestREADMEOnLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker")
	}
	r := newReadmeRun(t, "./bin/broker serve")
	r.cliBlock(t)
	r.curlBlock(t)
	if got := r.createdOn(t); strings.Join(got, " ") != "local local" {
		t.Fatalf("workspaces created on %q, want the CLI's and curl's on local", got)
	}
	// The exec -t line run by a script, its stdin a pipe: the shell ends
	// with its input instead of waiting on a terminal for ever.
	start := time.Now()
	out := r.sh(t, `WS=$(./bin/broker ws create); echo 'echo piped-$((6*7))' | ./bin/broker exec -t $WS -- bash; ./bin/broker ws rm $WS`, "")
	if !strings.Contains(out, "\npiped-42\n") || !strings.Contains(out, "stdin is not a terminal") || time.Since(start) > time.Minute {
		t.Fatalf("exec -t from a pipe, after %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	}
}

// TestREADMEOnDocker runs the same blocks against `./bin/broker serve
// --docker`: the CLI's `ws create` makes a container, the default backend.
func TestREADMEOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker")
	}
	testutil.RequireDocker(t)
	testutil.RequireImage(t, "wsbroker/workspace:current")
	r := newReadmeRun(t, "./bin/broker serve --docker")
	r.cliBlock(t)
	r.curlBlock(t)
	if got := r.createdOn(t); strings.Join(got, " ") != "docker local" {
		t.Fatalf("workspaces created on %q, want the CLI's on docker (the default) and curl's on local (named)", got)
	}
	for _, backend := range []string{"docker", "local"} {
		if !strings.Contains(r.readme, "broker ws create --backend "+backend) && !strings.Contains(r.readme, "`--backend "+backend+"`") {
			t.Fatalf("the README no longer shows ws create --backend %s", backend)
		}
		r.sh(t, `WS=$(./bin/broker ws create --backend `+backend+`); ./bin/broker ws rm $WS`, "")
	}
	if got := r.createdOn(t); strings.Join(got[2:], " ") != "docker local" {
		t.Fatalf("ws create --backend docker, then local: created on %q", got[2:])
	}
}

// readmeRun is one run of the README: its text, the working directory
// (bin/ and a copy of docs/, as in a clone), and the broker it started.
type readmeRun struct {
	readme string
	dir    string
	addr   string
	env    []string // XDG_STATE_HOME, BROKER_URL
	stdout *testutil.LockedBuffer
	stderr *testutil.LockedBuffer
}

// newReadmeRun starts the README's serve command, which must be in the
// README as it is given.
func newReadmeRun(t *testing.T, serve string) *readmeRun {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := &readmeRun{readme: string(b), dir: t.TempDir(), addr: freeAddr(t),
		stdout: &testutil.LockedBuffer{}, stderr: &testutil.LockedBuffer{}}
	if !strings.Contains(r.readme, serve) {
		t.Fatalf("the README does not say %q", serve)
	}
	if err := os.Symlink(binDir, filepath.Join(r.dir, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(r.dir, "docs"), os.DirFS(filepath.Join(repoRoot, "docs"))); err != nil {
		t.Fatal(err)
	}
	r.env = append(cleanEnv(), "XDG_STATE_HOME="+t.TempDir(), "BROKER_URL=http://"+r.addr)
	args := append(strings.Fields(serve)[1:], "--listen", r.addr)
	cmd := exec.Command(filepath.Join(r.dir, "bin", "broker"), args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = r.dir, r.env, r.stdout, r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
		}
		t.Logf("the broker ended: %v", err)
		if t.Failed() {
			t.Logf("broker stdout:\n%s\nbroker stderr:\n%s", r.stdout.String(), r.stderr.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(r.stdout.String(), "Next, from another shell") {
		select {
		case err := <-done:
			t.Fatalf("%s exited before serving: %v\n%s", serve, err, r.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no next step within 60s", serve)
		}
	}
	return r
}

// cliBlock runs the README's CLI block with a terminal on stdin, on which
// a command and exit are typed for its interactive shell.
func (r *readmeRun) cliBlock(t *testing.T) {
	block := r.block(t, "With the CLI")
	out := r.sh(t, block, "echo from-the-terminal-$((6*7))\rexit\r")
	for _, want := range []string{
		"hello\n",                      // python3 hello.py, after the edit
		"hello.py:1: print(\"hello\")", // grep
		"\n3\n",                        // seq 3 | wc -l
		"1\n2\n3\n",                    // logs -f
		"from-the-terminal-42",         // typed at exec -t's shell
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the CLI block's output lacks %q", want)
		}
	}
	in, _ := os.ReadFile(filepath.Join(r.dir, "docs", "api.md"))
	if back, err := os.ReadFile(filepath.Join(r.dir, "docs-back", "api.md")); err != nil || len(in) == 0 || string(back) != string(in) {
		t.Errorf("docs/api.md copied in and out again: %v, %d bytes of %d", err, len(back), len(in))
	}
	if t.Failed() {
		t.Fatalf("the CLI block's output:\n%s", out)
	}
}

// curlBlock runs the README's curl block.
func (r *readmeRun) curlBlock(t *testing.T) {
	out := r.sh(t, r.block(t, "With curl:"), "")
	for _, want := range []string{"Successfully", "one\\n2", `"isError":false`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the curl block's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"isError":true`) || strings.Contains(out, `"code":`) {
		t.Fatalf("the curl block met an error:\n%s", out)
	}
}

// block is the body of the first sh block after the line that starts
// with intro, with the README's address and copy-out directory replaced.
func (r *readmeRun) block(t *testing.T, intro string) string {
	i := strings.Index(r.readme, "\n"+intro)
	if i < 0 {
		t.Fatalf("the README has no line starting %q", intro)
	}
	rest := r.readme[i:]
	start := strings.Index(rest, "\n```sh\n")
	if start < 0 {
		t.Fatalf("no sh block after %q", intro)
	}
	body := rest[start+len("\n```sh\n"):]
	end := strings.Index(body, "\n```")
	if end < 0 {
		t.Fatalf("the sh block after %q does not end", intro)
	}
	body = body[:end+1]
	body = strings.ReplaceAll(body, readmeAddr, r.addr)
	return strings.ReplaceAll(body, "/tmp/docs-back", filepath.Join(r.dir, "docs-back"))
}

// sh runs script with bash -e -o pipefail in the run's directory and
// environment, stdin a terminal on which typed was typed, and returns
// stdout and stderr together.
func (r *readmeRun) sh(t *testing.T, script, typed string) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	go func() { _, _ = io.Copy(io.Discard, ptmx) }() // the terminal's echo
	if _, err := ptmx.WriteString(typed); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-x", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdin = r.dir, r.env, tty
	// A hung line fails the test: the script's whole process group is
	// killed at the deadline, and Wait does not wait for its pipes after.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash: %v (context: %v)\nscript:\n%s\noutput:\n%s", err, ctx.Err(), script, out.String())
	}
	return out.String()
}

// createdOn lists the backend of every workspace created, from the
// broker's log, in order.
func (r *readmeRun) createdOn(t *testing.T) []string {
	var backends []string
	sc := bufio.NewScanner(strings.NewReader(r.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct{ Msg, Backend, Tenant string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "workspace created" && line.Tenant != "" {
			backends = append(backends, line.Backend)
		}
	}
	return backends
}

// cleanEnv is the test's environment without the broker's variables, so
// that the user's own settings do not leak into the README's run.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BROKER_") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	return env
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
