package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// binary is the broker built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "broker-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "broker")
	build := exec.Command("go", "build", "-o", binary, "./cmd/broker")
	build.Dir = ".." // the module root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the broker:", err)
		return 1
	}
	return m.Run()
}

// broker is a running `broker serve`.
type broker struct {
	cmd     *exec.Cmd
	url     string
	state   string
	home    string
	stderr  *testutil.LockedBuffer // the JSON log and the one-time token banner
	stdout  *testutil.LockedBuffer // the next step, for a person
	done    chan struct{}          // closed when the process has exited
	waitErr error                  // Wait's result, set before done is closed
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startBroker runs `broker serve` with HOME and a state directory inside
// it, and waits until /healthz answers. extra are more serve flags.
func startBroker(t *testing.T, home string, extra ...string) *broker {
	t.Helper()
	b := &broker{state: filepath.Join(home, "state"), home: home, stderr: &testutil.LockedBuffer{}, stdout: &testutil.LockedBuffer{}, done: make(chan struct{})}
	port := freePort(t)
	b.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	b.cmd = exec.Command(binary, append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--shutdown-grace", "3s"}, extra...)...)
	b.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "BROKER_STATE_DIR=" + b.state}
	b.cmd.Stdout = b.stdout
	b.cmd.Stderr = b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.waitErr = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
		if t.Failed() {
			t.Logf("broker output:\n%s%s", b.stdout.String(), b.stderr.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(b.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b
			}
		}
		select {
		case <-b.done:
			t.Fatalf("broker exited before serving: %v\n%s", b.waitErr, b.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not answer /healthz within 30s:\n%s", b.stderr.String())
		}
	}
}

// env is the environment of a CLI call against b: the URL, and the state
// directory whose token file is the default token.
func (b *broker) env() []string {
	return []string{"HOME=" + b.home, "PATH=" + os.Getenv("PATH"), "BROKER_URL=" + b.url, "BROKER_STATE_DIR=" + b.state}
}

type result struct {
	stdout, stderr string
	code           int
}

// cli runs the broker binary with args and returns its output and status.
func (b *broker) cli(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = b.env()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("broker %q: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func (b *broker) mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := b.cli(t, "", args...)
	if r.code != 0 {
		t.Fatalf("broker %q: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// marker returns a `sleep` argument no other process on the machine uses,
// so the test can find exactly the processes it started.
func marker() string {
	return fmt.Sprintf("%d.%06d", 1000+rand.IntN(8000), rand.IntN(1000000))
}

// sleepers lists the pids of `sleep <mark>` processes.
func sleepers(mark string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	want := []byte("sleep\x00" + mark + "\x00")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		// The argv may be "sleep" or a path ending in "/sleep".
		if bytes.HasSuffix(cmdline, want) && (bytes.Equal(cmdline, want) || bytes.HasSuffix(cmdline[:len(cmdline)-len(want)], []byte("/"))) {
			if !isZombie(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// waitFor polls cond for up to limit; it is a bound on a behaviour ("the
// process goes away"), not a speed assertion.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var idPattern = regexp.MustCompile(`^ws_[a-z2-7]{26}$`)

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker binary")
	}
	home := t.TempDir()
	b := startBroker(t, home)

	token := checkTokenFile(t, b)

	t.Run("version", func(t *testing.T) {
		out := b.mustCLI(t, "version")
		if !strings.HasPrefix(out, "broker ") || !strings.Contains(out, "go1.") {
			t.Fatalf("version output %q", out)
		}
	})

	ws := strings.TrimSpace(b.mustCLI(t, "ws", "create"))
	if !idPattern.MatchString(ws) {
		t.Fatalf("ws create printed %q, want a workspace id", ws)
	}
	if out := b.mustCLI(t, "ws", "ls"); !strings.Contains(out, ws) {
		t.Fatalf("ws ls does not list %s:\n%s", ws, out)
	}

	t.Run("tools", func(t *testing.T) { cliTools(t, b, ws) })
	t.Run("exec", func(t *testing.T) { cliExec(t, b, ws) })
	t.Run("http", func(t *testing.T) { rawHTTP(t, b, ws, token) })
	t.Run("interrupt", func(t *testing.T) { interruptExec(t, b, ws) })

	// A background process started by exec outlives the call (as in pi)
	// but not its workspace.
	bg := marker()
	r := b.cli(t, "", "exec", ws, "--", fmt.Sprintf("sleep %s >/dev/null 2>&1 & echo started", bg))
	if r.code != 0 || !strings.Contains(r.stdout, "started") {
		t.Fatalf("background exec: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !waitFor(5*time.Second, func() bool { return len(sleepers(bg)) == 1 }) {
		t.Fatalf("background sleep %s not running after exec returned", bg)
	}
	b.mustCLI(t, "ws", "rm", ws)
	if !waitFor(10*time.Second, func() bool { return len(sleepers(bg)) == 0 }) {
		t.Fatalf("background sleep %s still running after ws rm: pids %v", bg, sleepers(bg))
	}
	if out := b.mustCLI(t, "ws", "ls"); strings.Contains(out, ws) {
		t.Fatalf("ws ls still lists %s after rm:\n%s", ws, out)
	}
	if r := b.cli(t, "", "tool", ws, "ls", "{}"); r.code == 0 {
		t.Fatalf("tool on a deleted workspace exited 0: %q", r.stdout)
	}

	var kept string
	t.Run("sigterm", func(t *testing.T) { kept = gracefulShutdown(t, b) })
	checkLogs(t, b, token)

	// A restart on the same state directory keeps the token (not printed
	// again) and finds the workspace that was left.
	b2 := startBroker(t, home)
	if strings.Contains(b2.stderr.String(), token) || strings.Contains(b2.stderr.String(), "created a new API token") {
		t.Fatalf("the token was printed again on restart:\n%s", b2.stderr.String())
	}
	if kept != "" {
		if out := b2.mustCLI(t, "ws", "ls"); !strings.Contains(out, kept) {
			t.Errorf("workspace %s lost across a restart:\n%s", kept, out)
		}
		b2.mustCLI(t, "ws", "rm", kept)
	}
	if err := b2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b2.done:
		if b2.waitErr != nil {
			t.Fatalf("second broker exited with %v after SIGTERM", b2.waitErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("second broker still running 20s after SIGTERM")
	}
}

// checkTokenFile asserts the zero-config token: written 0600 into the
// state directory, printed once.
func checkTokenFile(t *testing.T, b *broker) string {
	t.Helper()
	path := filepath.Join(b.state, "token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("token file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	if len(token) < 32 {
		t.Fatalf("token %q is too short", token)
	}
	if n := strings.Count(b.stderr.String(), token); n != 1 {
		t.Fatalf("token printed %d times at first start, want once", n)
	}
	return token
}

func cliTools(t *testing.T, b *broker, ws string) {
	out := b.mustCLI(t, "tool", ws, "write", `{"path":"src/hello.txt","content":"hello world\nsecond line\n"}`)
	if !strings.Contains(out, "Successfully wrote") {
		t.Fatalf("write: %q", out)
	}
	out = b.mustCLI(t, "tool", ws, "edit", `{"path":"src/hello.txt","edits":[{"oldText":"world","newText":"broker"}]}`)
	if !strings.Contains(out, "Successfully replaced 1 block(s)") {
		t.Fatalf("edit: %q", out)
	}
	out = b.mustCLI(t, "tool", ws, "read", `{"path":"src/hello.txt"}`)
	if !strings.Contains(out, "hello broker\nsecond line") {
		t.Fatalf("read after edit: %q", out)
	}
	out = b.mustCLI(t, "tool", ws, "bash", `{"command":"echo $((6*7)); ls src"}`)
	if !strings.Contains(out, "42\nhello.txt") {
		t.Fatalf("bash: %q", out)
	}
	out = b.mustCLI(t, "tool", ws, "grep", `{"pattern":"broker"}`)
	if !strings.Contains(out, "hello.txt:1: hello broker") {
		t.Fatalf("grep: %q", out)
	}
	// Arguments from stdin.
	r := b.cli(t, `{"pattern":"*.txt"}`, "tool", ws, "find", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "src/hello.txt") {
		t.Fatalf("find from stdin: exit %d %q %q", r.code, r.stdout, r.stderr)
	}

	// A tool failure is shown, and exits 1.
	r = b.cli(t, "", "tool", ws, "read", `{"path":"missing.txt"}`)
	if r.code != 1 || !strings.Contains(r.stderr, "missing.txt") {
		t.Fatalf("read of a missing file: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = b.cli(t, "", "tool", ws, "bash", `{"command":"echo oops; exit 3"}`)
	if r.code != 1 || !strings.Contains(r.stderr, "Command exited with code 3") {
		t.Fatalf("failing bash tool: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Invalid arguments are a tool error too, with pi's text.
	r = b.cli(t, "", "tool", ws, "read", `{"offset":1}`)
	if r.code != 1 || !strings.Contains(r.stderr, `Validation failed for tool "read"`) {
		t.Fatalf("invalid arguments: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// An unknown tool is the broker refusing the call.
	r = b.cli(t, "", "tool", ws, "nope", `{}`)
	if r.code != 1 || r.stderr == "" {
		t.Fatalf("unknown tool: exit %d, stderr %q", r.code, r.stderr)
	}
	// Arguments that are not JSON never reach the broker.
	if r := b.cli(t, "", "tool", ws, "read", `{path:`); r.code != 2 {
		t.Fatalf("non-JSON arguments: exit %d, want 2 (usage)", r.code)
	}
}

func cliExec(t *testing.T, b *broker, ws string) {
	r := b.cli(t, "", "exec", ws, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.code != 7 {
		t.Fatalf("exit status %d, want 7 (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "out\n") || !strings.Contains(r.stdout, "err\n") {
		t.Fatalf("exec output %q: want the command's stdout and stderr", r.stdout)
	}
	r = b.cli(t, "", "exec", "--cwd", "src", "--env", "GREETING=hi there", ws, "--", `echo "$GREETING"; pwd; cat hello.txt | wc -l`)
	if r.code != 0 || !strings.Contains(r.stdout, "hi there\n") || !strings.Contains(r.stdout, "/src\n") || !strings.Contains(r.stdout, "2\n") {
		t.Fatalf("exec with cwd and env: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A signal is reported as 128+N, as a shell does.
	r = b.cli(t, "", "exec", ws, "--", "kill -9 $$")
	if r.code != 137 {
		t.Fatalf("killed command: exit %d, want 137 (stderr %q)", r.code, r.stderr)
	}
	r = b.cli(t, "", "exec", "--timeout", "500ms", ws, "--", "sleep 30")
	if r.code == 0 || !strings.Contains(r.stderr, "timed out") {
		t.Fatalf("timed-out command: exit %d, stderr %q", r.code, r.stderr)
	}
	r = b.cli(t, "", "exec", "--cwd", "no/such/dir", ws, "--", "true")
	if r.code != 1 || r.stderr == "" {
		t.Fatalf("missing cwd: exit %d, stderr %q", r.code, r.stderr)
	}
	// Large output streams through intact.
	r = b.cli(t, "", "exec", ws, "--", "head -c 3000000 /dev/zero | tr '\\0' x")
	if r.code != 0 || len(r.stdout) != 3000000 || strings.Trim(r.stdout, "x") != "" {
		t.Fatalf("large output: exit %d, %d bytes", r.code, len(r.stdout))
	}
}

// reply is a whole HTTP response, its body read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

// request sends one raw HTTP request, as curl would.
func request(t *testing.T, method, url, token, contentType string, body io.Reader) (reply, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, data
}

func rawHTTP(t *testing.T, b *broker, ws, token string) {
	base := b.url + "/v1/workspaces/" + ws

	// No token, a wrong token: 401 problem documents.
	for _, tok := range []string{"", "not-the-token"} {
		resp, body := request(t, "GET", b.url+"/v1/workspaces", tok, "", nil)
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") ||
			!strings.Contains(string(body), `"code":"unauthorized"`) {
			t.Fatalf("token %q: %d %s %s", tok, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}

	resp, body := request(t, "GET", b.url+"/v1/tools", token, "", nil)
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &list) != nil || len(list.Tools) != 7 {
		t.Fatalf("GET /v1/tools: %d %s", resp.StatusCode, body)
	}

	// Raw bytes in and out, NUL and non-UTF-8 included.
	payload := []byte("raw\x00bytes\xff\xfe\n")
	resp, body = request(t, "PUT", base+"/files?path=data/raw.bin&mkdirs=1", token, "application/octet-stream", bytes.NewReader(payload))
	if resp.StatusCode != 204 {
		t.Fatalf("PUT files: %d %s", resp.StatusCode, body)
	}
	resp, body = request(t, "GET", base+"/files?path=data/raw.bin", token, "", nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, payload) {
		t.Fatalf("GET files: %d %q", resp.StatusCode, body)
	}
	resp, body = request(t, "GET", base+"/stat?path=data/raw.bin", token, "", nil)
	var fi struct {
		Type string `json:"type"`
		Size int64  `json:"size"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &fi) != nil || fi.Type != "file" || fi.Size != int64(len(payload)) {
		t.Fatalf("GET stat: %d %s", resp.StatusCode, body)
	}

	// A whole tool, as JSON.
	resp, body = request(t, "POST", base+"/tools/read", token, "application/json", strings.NewReader(`{"path":"src/hello.txt"}`))
	var res struct {
		Content []struct{ Type, Text string } `json:"content"`
		IsError bool                          `json:"isError"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &res) != nil || res.IsError || len(res.Content) != 1 ||
		!strings.Contains(res.Content[0].Text, "hello broker") {
		t.Fatalf("POST tools/read: %d %s", resp.StatusCode, body)
	}

	// Errors carry their stable code.
	resp, body = request(t, "GET", base+"/files?path=nope.txt", token, "", nil)
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"code":"not_exist"`) {
		t.Fatalf("missing file: %d %s", resp.StatusCode, body)
	}
	resp, body = request(t, "GET", b.url+"/v1/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa/stat?path=x", token, "", nil)
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"code":"not_found"`) {
		t.Fatalf("unknown workspace: %d %s", resp.StatusCode, body)
	}
	resp, body = request(t, "POST", base+"/tools/read", token, "application/json", strings.NewReader(`{"path":`))
	if resp.StatusCode != 400 {
		t.Fatalf("malformed tool body: %d %s", resp.StatusCode, body)
	}

	// exec as NDJSON: output lines, then the exit line.
	resp, body = request(t, "POST", base+"/exec", token, "application/json", strings.NewReader(`{"command":"printf hi; exit 4","timeout":10}`))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("exec: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var output []byte
	var exit struct {
		Type     string `json:"type"`
		ExitCode int    `json:"exitCode"`
	}
	for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		var l struct {
			Type string `json:"type"`
			Data []byte `json:"data"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("exec line %q: %v", line, err)
		}
		switch l.Type {
		case "output":
			output = append(output, l.Data...)
		case "exit":
			_ = json.Unmarshal(line, &exit)
		}
	}
	if string(output) != "hi" || exit.Type != "exit" || exit.ExitCode != 4 {
		t.Fatalf("exec stream: output %q, exit %+v\n%s", output, exit, body)
	}
}

// interruptExec sends SIGINT to `broker exec` and to `broker tool ...
// bash` (a Ctrl-C) and checks that the remote command is killed.
func interruptExec(t *testing.T, b *broker, ws string) {
	mark := marker()
	stdout, stderr := interrupt(t, b, mark, "exec", ws, "--", "echo running; sleep "+mark)
	if !strings.Contains(stdout, "running") || !strings.Contains(stderr, "interrupted") {
		t.Errorf("exec: stdout %q, stderr %q", stdout, stderr)
	}
	mark = marker()
	_, stderr = interrupt(t, b, mark, "tool", ws, "bash", `{"command":"echo running; sleep `+mark+`"}`)
	// The broker's own aborted result, with the output so far.
	if !strings.Contains(stderr, "running") || !strings.Contains(stderr, "Command aborted") {
		t.Errorf("tool: stderr %q, want the output so far and Command aborted", stderr)
	}
}

// interrupt runs the CLI with args until `sleep mark` runs remotely, sends
// it SIGINT, and checks exit status 130 and that the sleep is gone.
func interrupt(t *testing.T, b *broker, mark string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = b.env()
	var out, errb testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if !waitFor(10*time.Second, func() bool { return len(sleepers(mark)) == 1 }) {
		_ = cmd.Process.Kill()
		t.Fatalf("%q: remote sleep did not start; stdout %q stderr %q", args, out.String(), errb.String())
	}
	_ = cmd.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%q did not exit within 20s of SIGINT", args)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("%q after SIGINT: %v, want exit status 130 (stderr %q)", args, err, errb.String())
	}
	if !waitFor(10*time.Second, func() bool { return len(sleepers(mark)) == 0 }) {
		t.Fatalf("%q: remote sleep %s survived the interrupt: pids %v", args, mark, sleepers(mark))
	}
	return out.String(), errb.String()
}

// gracefulShutdown sends SIGTERM to the broker while a command runs and
// checks a clean exit with nothing left behind. It returns the workspace
// it created, which outlives the broker.
func gracefulShutdown(t *testing.T, b *broker) string {
	ws := strings.TrimSpace(b.mustCLI(t, "ws", "create"))
	mark := marker()
	cmd := exec.Command(binary, "exec", ws, "--", "sleep "+mark)
	cmd.Env = b.env()
	var errb testutil.LockedBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	execDone := make(chan error, 1)
	go func() { execDone <- cmd.Wait() }()
	if !waitFor(10*time.Second, func() bool { return len(sleepers(mark)) == 1 }) {
		_ = cmd.Process.Kill()
		t.Fatal("remote sleep did not start")
	}

	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
		if b.waitErr != nil {
			t.Fatalf("broker exited with %v after SIGTERM, want status 0", b.waitErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("broker still running 20s after SIGTERM")
	}
	if pids := sleepers(mark); len(pids) != 0 {
		t.Fatalf("running command survived the broker's shutdown: pids %v", pids)
	}
	select {
	case err := <-execDone:
		if err == nil {
			t.Fatal("broker exec exited 0 although the broker went away mid-command")
		}
		if !strings.Contains(errb.String(), "the broker stopped the command") {
			t.Errorf("broker exec during shutdown: %v, stderr %q; want it to say the broker stopped it", err, errb.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("broker exec still running 10s after the broker stopped")
	}
	// Nothing answers any more.
	if resp, err := http.Get(b.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("the broker's port still answers after shutdown")
	}
	return ws
}

// checkLogs asserts the log is JSON lines and never carries the token.
func checkLogs(t *testing.T, b *broker, token string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(b.stderr.String()), "\n")
	jsonLines := 0
	for _, l := range lines {
		if l == token || strings.HasPrefix(l, "broker: created a new API token") {
			continue // the one-time banner
		}
		if !strings.HasPrefix(l, "{") || !strings.HasSuffix(l, "}") {
			t.Errorf("log line is not JSON: %q", l)
			continue
		}
		jsonLines++
	}
	if jsonLines == 0 {
		t.Error("no JSON log lines")
	}
	if n := strings.Count(b.stderr.String(), token); n != 1 {
		t.Errorf("token appears %d times in the output, want only the one-time banner", n)
	}
}
