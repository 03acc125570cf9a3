package adversarial

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
)

// Options configure a run.
type Options struct {
	// New returns a fresh workspace, destroyed when t ends.
	New func(t *testing.T) opsapi.Workspace
	// MemoryLimit is the memory limit New's workspaces have; 0 skips the
	// OOM case.
	MemoryLimit int64
	// LimitInStatus: the backend reports ExecResult.MemoryLimit, so the
	// bash tool's OOM line must name it.
	LimitInStatus bool
	// PidsLimit is the pids limit New's workspaces have; 0 skips the fork
	// bomb.
	PidsLimit int64
	// Health, when set, is probed while the fork bomb and CPU spin run
	// (the broker's /healthz); it must keep answering.
	Health func() error
	// InProcess: the backend runs in this process, so goroutines and
	// file descriptors are counted before and after each case.
	InProcess bool
	// FullDir, when set, returns a directory inside ws (relative) on a
	// small file system; the disk-fill case writes there.
	FullDir func(t *testing.T, ws opsapi.Workspace) string
	// EnvEscapeGap, when set, says why a process that leaves its process
	// group and clears its environment survives a call's kill on this
	// backend; the case is skipped with that reason.
	EnvEscapeGap string
	// Grace is the backend's kill grace (bounds how long a kill may
	// take); default 2 s.
	Grace time.Duration
}

// Run runs every case that applies.
func Run(t *testing.T, o Options) {
	if o.Grace == 0 {
		o.Grace = 2 * time.Second
	}
	s := &suite{o: o}
	cases := []struct {
		name string
		f    func(t *testing.T)
		skip bool
	}{
		{"timeout_kills_a_grandchild_tree", s.grandchildren, false},
		{"timeout_kills_setsid_nohup_and_double_fork_escapes", s.escapes, false},
		{"timeout_kills_an_env_clearing_setsid_escape", s.envEscape, o.EnvEscapeGap != ""},
		{"background_child_holding_the_pipe_returns_and_is_killable", s.backgroundPipe, false},
		{"1000_zombies_are_reaped_and_the_next_command_forks", s.zombies, false},
		{"cancel_kills_the_tree", s.cancel, false},
		{"fork_bomb_is_contained_by_the_pids_limit", s.forkBomb, o.PidsLimit == 0},
		{"memory_hog_is_OOM_killed_and_reported", s.oom, o.MemoryLimit == 0},
		{"disk_fill_gives_ENOSPC", s.diskFill, o.FullDir == nil},
		{"one_1GiB_line_is_truncated_and_memory_stays_bounded", s.hugeLine, false},
		{"NUL_and_invalid_UTF8_through_the_bash_tool_are_valid_JSON", s.binaryOutput, false},
		{"CPU_spin_in_one_workspace_leaves_another_answering", s.cpuSpin, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip {
				if c.name == "timeout_kills_an_env_clearing_setsid_escape" {
					t.Skip("known gap of this backend (docs/security.md): " + o.EnvEscapeGap)
				}
				t.Skip("the backend under test sets no such limit")
			}
			s.guard(t)
			c.f(t)
		})
	}
}

type suite struct{ o Options }

// guard checks after the case that a canary outside any workspace is
// untouched and, in process, that goroutines and descriptors came back.
func (s *suite) guard(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "canary")
	content := []byte("canary " + strconv.Itoa(rand.Int()))
	if err := os.WriteFile(canary, content, 0o644); err != nil {
		t.Fatal(err)
	}
	g0, f0 := runtime.NumGoroutine(), openFDs()
	t.Cleanup(func() {
		if got, err := os.ReadFile(canary); err != nil || sha256.Sum256(got) != sha256.Sum256(content) {
			t.Errorf("canary outside the workspace changed: %q, %v", got, err)
		}
		if !s.o.InProcess {
			return
		}
		// Goroutines of a finished call wind down asynchronously
		// (HTTP keep-alives, drains): give them time, then allow
		// slack for the runtime's own.
		var g, f int
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			g, f = runtime.NumGoroutine(), openFDs()
			if g <= g0+10 && f <= f0+10 {
				return
			}
		}
		t.Errorf("leak: goroutines %d -> %d, fds %d -> %d", g0, g, f0, f)
	})
}

func openFDs() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(es)
}

// token is a unique sleep duration: processes running `sleep <token>` are
// this case's, wherever they run.
func token() string { return fmt.Sprintf("600.%06d", rand.IntN(1000000)) }

func (s *suite) ws(t *testing.T) opsapi.Operations {
	w := s.o.New(t)
	ops, ok := w.(opsapi.Operations)
	if !ok {
		t.Fatalf("%T does not serve every operation", w)
	}
	return ops
}

func exec(t *testing.T, ws opsapi.BashOperations, cmd string, timeout time.Duration) (opsapi.ExecResult, string) {
	t.Helper()
	var out testutil.LockedBuffer
	res, err := ws.Exec(context.Background(), opsapi.ExecRequest{Command: cmd, Timeout: timeout, Output: &out})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return res, out.String()
}

// count is how many live processes in the workspace run `sleep <tok>`.
// The pattern reaches grep through the environment with a bracket, so
// neither the shell nor grep matches itself.
func count(t *testing.T, ws opsapi.BashOperations, tok string) int {
	t.Helper()
	pat := "sleep 6[0]0" + strings.TrimPrefix(tok, "600")
	var out testutil.LockedBuffer
	res, err := ws.Exec(context.Background(), opsapi.ExecRequest{
		Command: `for f in /proc/[0-9]*; do if [ -r $f/cmdline ] && ! grep -qs '^State:[[:space:]]*Z' $f/status; then { tr '\0' ' ' <$f/cmdline; } 2>/dev/null; echo; fi; done | grep -c -e "$PAT"`,
		Env:     []string{"PAT=" + pat},
		Timeout: 30 * time.Second,
		Output:  &out,
	})
	if err != nil || res.TimedOut {
		t.Fatalf("counting processes: %+v %v", res, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("counting processes: %q", out.String())
	}
	return n
}

// noneLeft waits up to 10 s for every `sleep <tok>` to be gone.
func noneLeft(t *testing.T, ws opsapi.BashOperations, tok string) {
	t.Helper()
	n := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if n = count(t, ws, tok); n == 0 {
			return
		}
	}
	t.Errorf("%d processes of the case still running", n)
}

// bounded checks that a killed call came back within timeout + grace +
// generous slack.
func (s *suite) bounded(t *testing.T, res opsapi.ExecResult, timeout time.Duration) {
	t.Helper()
	if limit := timeout + s.o.Grace + 10*time.Second; res.Duration > limit {
		t.Errorf("the call took %v, over %v", res.Duration, limit)
	}
}

// killedAtTimeout runs script (with %[1]s standing for the case's token)
// under a 1 s timeout and checks that it was killed, counted at least
// minKilled processes, came back in time and left nothing running.
func (s *suite) killedAtTimeout(t *testing.T, script string, minKilled int) {
	ws, tok := s.ws(t), token()
	res, _ := exec(t, ws, fmt.Sprintf(script, tok), time.Second)
	if !res.TimedOut || res.Killed < minKilled {
		t.Errorf("result %+v, want TimedOut and Killed >= %d", res, minKilled)
	}
	s.bounded(t, res, time.Second)
	noneLeft(t, ws, tok)
}

func (s *suite) grandchildren(t *testing.T) {
	s.killedAtTimeout(t, `sleep %[1]s & (sleep %[1]s & sleep %[1]s) & sleep %[1]s`, 3)
}

func (s *suite) escapes(t *testing.T) {
	s.killedAtTimeout(t, `setsid sleep %[1]s & nohup sleep %[1]s >/dev/null 2>&1 & `+
		`(setsid sh -c 'sleep %[1]s & exit 0' &) ; sleep %[1]s`, 1)
}

// envEscape leaves both the process group (setsid) and every marker
// variable (env -i): only a cgroup (or a pid namespace torn down with
// the workspace) still holds it.
func (s *suite) envEscape(t *testing.T) {
	s.killedAtTimeout(t, `setsid env -i /bin/sh -c 'exec sleep %[1]s' & sleep %[1]s`, 1)
}

func (s *suite) backgroundPipe(t *testing.T) {
	ws, tok := s.ws(t), token()
	res, out := exec(t, ws, fmt.Sprintf(`sleep %s & echo started`, tok), 60*time.Second)
	if res.TimedOut || res.ExitCode != 0 || out != "started\n" {
		t.Fatalf("result %+v %q: want a normal exit with the output", res, out)
	}
	if res.Duration > 20*time.Second {
		t.Errorf("returned after %v: the background child's pipe held the call", res.Duration)
	}
	// pi keeps the background child; it must be visible and killable.
	if n := count(t, ws, tok); n != 1 {
		t.Errorf("%d background sleeps, want 1 (pi lets it run)", n)
	}
	if pm, ok := ws.(opsapi.ProcessManager); ok {
		ps, err := pm.Processes(context.Background())
		if err == nil {
			var pids []int
			for _, p := range ps {
				if strings.Contains(p.Command, "sleep "+tok) {
					pids = append(pids, p.PID)
				}
			}
			if len(pids) != 1 {
				t.Fatalf("Processes = %+v, want the sleep", ps)
			}
			if n, err := pm.KillProcesses(context.Background(), pids); err != nil || n != 1 {
				t.Fatalf("KillProcesses = %d, %v", n, err)
			}
		}
	} else {
		exec(t, ws, "pkill -f 'sleep "+tok+"' || true", 10*time.Second)
	}
	noneLeft(t, ws, tok)
}

func (s *suite) zombies(t *testing.T) {
	ws := s.ws(t)
	const zcount = `grep -ls '^State:[[:space:]]*Z' /proc/[0-9]*/status | wc -l`
	_, before := exec(t, ws, zcount, 30*time.Second)
	b, _ := strconv.Atoi(strings.TrimSpace(before))
	// The subshells exit at once; their parent execs sleep, which never
	// reaps them: 1000 zombies until it exits and init takes them. Under
	// a pids limit zombies count against it, so there are at most half
	// the limit: more only fit while bash happens to reap some during the
	// loop, which a loaded machine does not (fork then fails, exit 254).
	n := 1000
	if s.o.PidsLimit > 0 {
		n = min(n, int(s.o.PidsLimit)/2)
	}
	res, _ := exec(t, ws, fmt.Sprintf(`for i in $(seq %d); do (:) & done; exec sleep 1`, n), 60*time.Second)
	if res.TimedOut || res.ExitCode != 0 {
		t.Fatalf("zombie factory: %+v", res)
	}
	var a int
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		_, after := exec(t, ws, zcount, 30*time.Second)
		if a, _ = strconv.Atoi(strings.TrimSpace(after)); a <= b+5 {
			break
		}
	}
	if a > b+5 {
		t.Errorf("zombies %d -> %d: nobody reaped them", b, a)
	}
	if res, out := exec(t, ws, "echo forked | cat", 30*time.Second); out != "forked\n" {
		t.Errorf("the next command cannot fork: %+v %q", res, out)
	}
}

func (s *suite) cancel(t *testing.T) {
	ws, tok := s.ws(t), token()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	var out testutil.LockedBuffer
	res, err := ws.Exec(ctx, opsapi.ExecRequest{
		Command: fmt.Sprintf(`setsid sleep %[1]s & sleep %[1]s & echo up; sleep %[1]s`, tok),
		Output:  &out,
	})
	// Over HTTP a cancel may surface as the canceled result or as the
	// context's error; either way the call ends and the tree dies.
	if err == nil && !res.Canceled {
		t.Errorf("result %+v, want Canceled", res)
	}
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	noneLeft(t, ws, tok)
}

// probe calls Health every 100 ms until stop closes and reports the first
// failure or an answer slower than 3 s.
func (s *suite) probe(stop <-chan struct{}) <-chan error {
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		if s.o.Health == nil {
			return
		}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			begin := time.Now()
			if err := s.o.Health(); err != nil {
				errc <- err
				return
			}
			if d := time.Since(begin); d > 3*time.Second {
				errc <- fmt.Errorf("health answered after %v", d)
				return
			}
		}
	}()
	return errc
}

func (s *suite) forkBomb(t *testing.T) {
	ws := s.ws(t)
	stop := make(chan struct{})
	errc := s.probe(stop)
	res, _ := exec(t, ws, `bomb() { bomb | bomb & }; bomb; sleep 30`, 3*time.Second)
	close(stop)
	if err := <-errc; err != nil {
		t.Errorf("the broker stopped answering during the fork bomb: %v", err)
	}
	if !res.TimedOut && res.ExitCode == 0 {
		t.Errorf("result %+v, want the bomb killed at its timeout", res)
	}
	s.bounded(t, res, 3*time.Second)
	// Once killed, the workspace forks again.
	var out string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && out != "ok\n"; time.Sleep(200 * time.Millisecond) {
		_, out = exec(t, ws, "echo ok | cat", 10*time.Second)
	}
	if out != "ok\n" {
		t.Errorf("the workspace cannot fork after the bomb: %q", out)
	}
}

func (s *suite) oom(t *testing.T) {
	ws := s.ws(t)
	tb := tools.New(ws, tools.Options{})
	t.Cleanup(func() { _ = tb.Close() })
	args, _ := json.Marshal(map[string]any{"command": `s=x; while :; do s="$s$s"; done`, "timeout": 60})
	r := tb.Call(context.Background(), "bash", args, nil)
	text := resultText(r)
	if !r.IsError || !strings.Contains(text, "Command was killed: out of memory") {
		t.Fatalf("bash tool said %q, want the OOM status line", text)
	}
	if want := fmt.Sprintf("(limit %d MiB)", s.o.MemoryLimit>>20); !strings.Contains(text, want) {
		if s.o.LimitInStatus {
			t.Errorf("status line %q does not name the limit %s", tail(text), want)
		} else {
			t.Logf("status line without the limit (this backend does not report it): %q", tail(text))
		}
	}
	if res, out := exec(t, ws, "echo alive", 30*time.Second); out != "alive\n" {
		t.Errorf("the workspace is unusable after the OOM kill: %+v %q", res, out)
	}
}

func resultText(r tools.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func (s *suite) diskFill(t *testing.T) {
	ws := s.ws(t)
	dir := s.o.FullDir(t, ws)
	res, out := exec(t, ws, `dd if=/dev/zero of=`+dir+`/fill bs=1M count=4096 2>&1; echo "dd=$?"`, 120*time.Second)
	if res.TimedOut || !strings.Contains(out, "No space left on device") || strings.Contains(out, "dd=0") {
		t.Fatalf("disk fill: %+v %q, want ENOSPC", res, out)
	}
	// A small write afterwards fails cleanly, then cleanup frees it.
	err := ws.WriteFile(context.Background(), dir+"/small", strings.NewReader(strings.Repeat("x", 1<<20)))
	if err == nil {
		t.Error("a write to the full file system succeeded")
	}
	if res, out := exec(t, ws, `rm -f `+dir+`/fill && echo freed`, 30*time.Second); out != "freed\n" {
		t.Fatalf("cleanup: %+v %q", res, out)
	}
	if err := ws.WriteFile(context.Background(), dir+"/small", strings.NewReader("ok")); err != nil {
		t.Errorf("write after cleanup: %v", err)
	}
}

func (s *suite) hugeLine(t *testing.T) {
	ws := s.ws(t)
	tb := tools.New(ws, tools.Options{})
	t.Cleanup(func() { _ = tb.Close() })
	var m0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	args, _ := json.Marshal(map[string]any{"command": `head -c 1073741824 /dev/zero | tr '\0' a; echo; echo end`, "timeout": 170})
	r := tb.Call(context.Background(), "bash", args, nil)
	text := resultText(r)
	if r.IsError || !strings.HasSuffix(text, "") || !strings.Contains(text, "end") {
		t.Fatalf("bash tool: isError=%v, %d bytes, tail %q", r.IsError, len(text), tail(text))
	}
	if len(text) > 200<<10 {
		t.Errorf("the result is %d bytes: not truncated", len(text))
	}
	if !strings.Contains(text, "Full output") && !strings.Contains(text, "Showing") {
		t.Errorf("no truncation notice in %q", tail(text))
	}
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	if s.o.InProcess && m1.HeapInuse > m0.HeapInuse+256<<20 {
		t.Errorf("heap grew %d MiB for a 1 GiB line", (m1.HeapInuse-m0.HeapInuse)>>20)
	}
}

func tail(s string) string {
	if len(s) > 300 {
		return s[len(s)-300:]
	}
	return s
}

func (s *suite) binaryOutput(t *testing.T) {
	ws := s.ws(t)
	tb := tools.New(ws, tools.Options{})
	t.Cleanup(func() { _ = tb.Close() })
	args, _ := json.Marshal(map[string]any{"command": `printf 'a\000b\377\376c\n'; head -c 100000 /dev/urandom; echo; echo end`, "timeout": 60})
	r := tb.Call(context.Background(), "bash", args, nil)
	text := resultText(r)
	if r.IsError || !strings.Contains(text, "end") {
		t.Fatalf("bash tool: %v %q", r.IsError, tail(text))
	}
	if !utf8.ValidString(text) {
		t.Error("the tool result is not valid UTF-8")
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("the result does not encode as JSON: %v", err)
	}
	if bytes.IndexByte([]byte(text), 0) >= 0 && !json.Valid(mustJSON(r)) {
		t.Error("NUL made the JSON invalid")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (s *suite) cpuSpin(t *testing.T) {
	a, b := s.ws(t), s.ws(t)
	n := runtime.NumCPU()
	done := make(chan opsapi.ExecResult, 1)
	go func() {
		var cmd strings.Builder
		for range n {
			cmd.WriteString(`(while :; do :; done) & `)
		}
		cmd.WriteString("wait")
		res, _ := a.Exec(context.Background(), opsapi.ExecRequest{Command: cmd.String(), Timeout: 6 * time.Second})
		done <- res
	}()
	stop := make(chan struct{})
	errc := s.probe(stop)
	time.Sleep(500 * time.Millisecond)
	for i := range 5 {
		begin := time.Now()
		res, out := exec(t, b, "echo ok", 30*time.Second)
		if out != "ok\n" || res.ExitCode != 0 {
			t.Fatalf("workspace B: %+v %q", res, out)
		}
		// Generous: the machine is shared, the bound is "still
		// answers", not a latency figure.
		if d := time.Since(begin); d > 5*time.Second {
			t.Errorf("workspace B call %d took %v while A spun", i, d)
		}
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Errorf("health during the spin: %v", err)
	}
	res := <-done
	if !res.TimedOut {
		t.Errorf("the spinner ended with %+v, want killed at its timeout", res)
	}
}
