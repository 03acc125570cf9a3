package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// bashExecOnly is a workspace that can run commands but not write files:
// its exec follows a script instead of running a process (real processes
// are exercised by the backend conformance suite).
type bashExecOnly struct {
	root   string
	script func(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error)

	mu   sync.Mutex
	reqs []opsapi.ExecRequest
}

func (w *bashExecOnly) Root() string { return w.root }

func (w *bashExecOnly) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	w.mu.Lock()
	w.reqs = append(w.reqs, req)
	w.mu.Unlock()
	return w.script(ctx, req)
}

func (w *bashExecOnly) requests() []opsapi.ExecRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]opsapi.ExecRequest(nil), w.reqs...)
}

// bashFakeWS adds WriteOperations that keep files in memory, so the spill
// file can be inspected; WriteFile is atomic like the real ones (an error
// from the reader leaves nothing).
type bashFakeWS struct {
	bashExecOnly
	mkdirErr error
	writeErr error // returned after reading 1000 bytes

	fmu   sync.Mutex
	dirs  map[string]bool
	files map[string][]byte
}

func newBashFakeWS(script func(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error)) *bashFakeWS {
	return &bashFakeWS{
		bashExecOnly: bashExecOnly{root: "/ws", script: script},
		dirs:         map[string]bool{"/ws": true},
		files:        map[string][]byte{},
	}
}

func (w *bashFakeWS) Mkdir(_ context.Context, p string) error {
	if w.mkdirErr != nil {
		return w.mkdirErr
	}
	w.fmu.Lock()
	defer w.fmu.Unlock()
	for d := p; d != "/"; d = path.Dir(d) {
		w.dirs[d] = true
	}
	return nil
}

func (w *bashFakeWS) WriteFile(ctx context.Context, p string, r io.Reader) error {
	w.fmu.Lock()
	ok := w.dirs[path.Dir(p)]
	w.fmu.Unlock()
	if !ok {
		return opsapi.E("fake.WriteFile", p, opsapi.ErrNotExist, nil)
	}
	if w.writeErr != nil {
		_, _ = io.CopyN(io.Discard, r, 1000)
		return w.writeErr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	w.fmu.Lock()
	w.files[p] = data
	w.fmu.Unlock()
	return nil
}

func (w *bashFakeWS) file(p string) ([]byte, bool) {
	w.fmu.Lock()
	defer w.fmu.Unlock()
	data, ok := w.files[p]
	return data, ok
}

// emit returns a script that writes chunks and then ends with res.
func emit(res opsapi.ExecResult, chunks ...string) func(context.Context, opsapi.ExecRequest) (opsapi.ExecResult, error) {
	return func(_ context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
		for _, c := range chunks {
			_, _ = io.WriteString(req.Output, c)
		}
		return res, nil
	}
}

// lineChunks splits s after every newline, as a pipe read might.
func lineChunks(s string) []string { return strings.SplitAfter(s, "\n") }

func bashCall(t *testing.T, ws opsapi.Workspace, opts Options, args string) Result {
	t.Helper()
	opts.Logger = testutil.Logger(t)
	tb := New(ws, opts)
	t.Cleanup(func() { _ = tb.Close() })
	return tb.Call(context.Background(), "bash", json.RawMessage(args), nil)
}

// bashExecute calls the tool's Execute directly, to tell a returned error
// from an isError result.
func bashExecute(t *testing.T, ws opsapi.Workspace, ctx context.Context, args string, onUpdate UpdateFunc) (Result, error) {
	t.Helper()
	tb := New(ws, Options{Logger: testutil.Logger(t)})
	t.Cleanup(func() { _ = tb.Close() })
	tool, ok := tb.Tool("bash")
	if !ok {
		t.Fatal("no bash tool")
	}
	return tool.Execute(ctx, json.RawMessage(args), onUpdate)
}

func resultText(t *testing.T, r Result) string {
	t.Helper()
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("content = %+v", r.Content)
	}
	return r.Content[0].Text
}

var spillPathRE = regexp.MustCompile(`^/wsbroker-output/bash-[0-9a-f]{16}\.log$`)

// spilled is the content of a full-output file of tb's store.
func spilled(tb *Toolbox, p string) ([]byte, bool) {
	name, ok := spillName(p)
	if !ok {
		return nil, false
	}
	rc, err := tb.env.spill.open(name)
	if err != nil {
		return nil, false
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	return data, err == nil
}

func TestBashSeq3000(t *testing.T) {
	full := seqLines(1, 3000)
	ws := newBashFakeWS(emit(opsapi.ExecResult{}, lineChunks(full)...))
	tb := New(ws, Options{Env: []string{"A=1"}, Logger: testutil.Logger(t)})
	t.Cleanup(func() { _ = tb.Close() })
	r := tb.Call(context.Background(), "bash", json.RawMessage(`{"command":"seq 3000"}`), nil)
	if r.IsError {
		t.Fatalf("isError: %s", resultText(t, r))
	}
	text := resultText(t, r)
	d, ok := r.Details.(*BashDetails)
	if !ok || d.Truncation == nil {
		t.Fatalf("details = %#v", r.Details)
	}
	if !spillPathRE.MatchString(d.FullOutputPath) {
		t.Fatalf("fullOutputPath = %q", d.FullOutputPath)
	}
	want := strings.TrimSuffix(seqLines(1001, 3000), "\n") +
		"\n\n[Showing lines 1001-3000 of 3000. Full output: " + d.FullOutputPath + "]"
	if text != want {
		t.Errorf("text ends %q", text[max(0, len(text)-120):])
	}
	if d.Truncation.By() != "lines" || d.Truncation.TotalLines != 3000 || d.Truncation.OutputLines != 2000 {
		t.Errorf("truncation = %+v", withoutContent(*d.Truncation))
	}
	data, ok := spilled(tb, d.FullOutputPath)
	if !ok || string(data) != full {
		t.Errorf("spill file holds %d bytes (exists %v), want all %d", len(data), ok, len(full))
	}
	if len(ws.files) != 0 {
		t.Errorf("the workspace was written: %v", ws.files)
	}
	reqs := ws.requests()
	if len(reqs) != 1 || reqs[0].Command != "seq 3000" || reqs[0].Cwd != "/ws" || reqs[0].Timeout != 0 ||
		len(reqs[0].Env) != 1 || reqs[0].Env[0] != "A=1" || reqs[0].Output == nil {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestBash4000Lines(t *testing.T) {
	ws := newBashFakeWS(emit(opsapi.ExecResult{}, seqLines(1, 4000)))
	text := resultText(t, bashCall(t, ws, Options{}, `{"command":"seq 4000"}`))
	if !strings.Contains(text, "\n\n[Showing lines 2001-4000 of 4000. Full output: /wsbroker-output/bash-") {
		t.Errorf("text ends %q", text[len(text)-100:])
	}
}

func TestBashBytesLimitNotice(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n"
	ws := newBashFakeWS(emit(opsapi.ExecResult{}, strings.Repeat(line, 1000)))
	r := bashCall(t, ws, Options{}, `{"command":"x"}`)
	text := resultText(t, r)
	d := r.Details.(*BashDetails)
	want := "\n\n[Showing lines 489-1000 of 1000 (50.0KB limit). Full output: " + d.FullOutputPath + "]"
	if !strings.HasSuffix(text, want) || d.Truncation.By() != "bytes" {
		t.Errorf("text ends %q, by %q", text[len(text)-100:], d.Truncation.By())
	}
}

func TestBashHugeLineNotice(t *testing.T) {
	line := strings.Repeat("0123456789", 1_000_000)
	ws := newBashFakeWS(emit(opsapi.ExecResult{}, line, "\n"))
	r := bashCall(t, ws, Options{}, `{"command":"x"}`)
	text := resultText(t, r)
	d := r.Details.(*BashDetails)
	want := line[len(line)-DefaultMaxBytes:] + "\n\n[Showing last 50.0KB of line 1 (line is 9.5MB). Full output: " + d.FullOutputPath + "]"
	if text != want {
		t.Errorf("text ends %q", text[len(text)-120:])
	}
}

func TestBashSmallOutput(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"hello\n", "hello\n"},
		{"a\nb", "a\nb"},
		{"", "(no output)"},
		{"\xff€\n", "\uFFFD€\n"},
	} {
		ws := newBashFakeWS(emit(opsapi.ExecResult{}, tc.out))
		r := bashCall(t, ws, Options{}, `{"command":"x"}`)
		if got := resultText(t, r); got != tc.want || r.IsError || r.Details != nil {
			t.Errorf("%q: got %q isError %v details %#v", tc.out, got, r.IsError, r.Details)
		}
		if len(ws.files) != 0 {
			t.Errorf("%q: a spill file was written", tc.out)
		}
	}
}

func TestBashExitCode(t *testing.T) {
	for _, tc := range []struct {
		out  string
		res  opsapi.ExecResult
		want string
	}{
		{"oops\n", opsapi.ExecResult{ExitCode: 1}, "oops\n\n\nCommand exited with code 1"},
		{"", opsapi.ExecResult{ExitCode: 2}, "(no output)\n\nCommand exited with code 2"},
		{"x", opsapi.ExecResult{ExitCode: 143, Signal: "SIGTERM"}, "x\n\nCommand exited with code 143"},
		{"big", opsapi.ExecResult{ExitCode: 137, Signal: "SIGKILL", OOMKilled: true},
			"big\n\nCommand was killed: out of memory\nCommand exited with code 137"},
		{"", opsapi.ExecResult{ExitCode: 0, OOMKilled: true},
			"(no output)\n\nCommand was killed: out of memory"},
		{"x", opsapi.ExecResult{ExitCode: 137, Signal: "SIGKILL", OOMKilled: true, MemoryLimit: 256 << 20},
			"x\n\nCommand was killed: out of memory (limit 256 MiB)\nCommand exited with code 137"},
		{"", opsapi.ExecResult{ExitCode: 0, OOMKilled: true, MemoryLimit: 2 << 30},
			"(no output)\n\nCommand was killed: out of memory (limit 2 GiB)"},
	} {
		ws := newBashFakeWS(emit(tc.res, tc.out))
		r, err := bashExecute(t, ws, context.Background(), `{"command":"x"}`, nil)
		if err != nil {
			t.Errorf("%+v: a Go error %v, want an isError result", tc.res, err)
			continue
		}
		if got := resultText(t, r); got != tc.want || !r.IsError {
			t.Errorf("%+v: got %q isError %v, want %q", tc.res, got, r.IsError, tc.want)
		}
	}
}

func TestBashExitCodeTruncated(t *testing.T) {
	ws := newBashFakeWS(emit(opsapi.ExecResult{ExitCode: 1}, seqLines(1, 3000)))
	r := bashCall(t, ws, Options{}, `{"command":"x"}`)
	text := resultText(t, r)
	d := r.Details.(*BashDetails)
	if !r.IsError || !strings.HasSuffix(text, "3000\n\n[Showing lines 1001-3000 of 3000. Full output: "+d.FullOutputPath+"]\n\nCommand exited with code 1") {
		t.Errorf("text ends %q", text[len(text)-120:])
	}
}

func TestBashTimedOut(t *testing.T) {
	full := seqLines(1, 3000)
	for _, tc := range []struct {
		arg     string
		timeout time.Duration
		text    string
	}{
		{"1", time.Second, "1"},
		{"0.5", 500 * time.Millisecond, "0.5"},
		{"2.0", 2 * time.Second, "2"},
		{`"3"`, 3 * time.Second, "3"},
	} {
		ws := newBashFakeWS(emit(opsapi.ExecResult{ExitCode: 137, TimedOut: true}, lineChunks(full)...))
		tb := New(ws, Options{Logger: testutil.Logger(t)})
		t.Cleanup(func() { _ = tb.Close() })
		r := tb.Call(context.Background(), "bash", json.RawMessage(`{"command":"sleep 9","timeout":`+tc.arg+`}`), nil)
		text := resultText(t, r)
		if !r.IsError || !strings.HasSuffix(text, "]\n\nCommand timed out after "+tc.text+" seconds") {
			t.Errorf("timeout %s: text ends %q", tc.arg, text[max(0, len(text)-120):])
		}
		if !strings.HasPrefix(text, "1001\n") {
			t.Errorf("timeout %s: text starts %q", tc.arg, text[:20])
		}
		if reqs := ws.requests(); len(reqs) != 1 || reqs[0].Timeout != tc.timeout {
			t.Errorf("timeout %s: requests %+v", tc.arg, reqs)
		}
		// The spill file is complete even though the command failed.
		// An error result has no details: the path is in the text.
		m := regexp.MustCompile(`Full output: (\S+)\]`).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("timeout %s: no full output path", tc.arg)
		} else if data, ok := spilled(tb, m[1]); !ok || string(data) != full {
			t.Errorf("timeout %s: spill file holds %d bytes", tc.arg, len(data))
		}
	}

	ws := newBashFakeWS(emit(opsapi.ExecResult{TimedOut: true}))
	if got := resultText(t, bashCall(t, ws, Options{}, `{"command":"sleep 9","timeout":1}`)); got != "Command timed out after 1 seconds" {
		t.Errorf("no output: %q", got)
	}
}

func TestBashAborted(t *testing.T) {
	ws := newBashFakeWS(emit(opsapi.ExecResult{ExitCode: 143, Canceled: true}, "partial\n"))
	r, err := bashExecute(t, ws, context.Background(), `{"command":"x"}`, nil)
	if err == nil || err.Error() != "partial\n\n\nCommand aborted" {
		t.Errorf("got %+v, %v", r, err)
	}

	ws = newBashFakeWS(emit(opsapi.ExecResult{Canceled: true}))
	if got := resultText(t, bashCall(t, ws, Options{}, `{"command":"x"}`)); got != "Command aborted" {
		t.Errorf("no output: %q", got)
	}

	// The caller's context ends while the command runs, and the backend
	// reports it as an error.
	ctx, cancel := context.WithCancel(context.Background())
	ws = newBashFakeWS(func(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
		_, _ = io.WriteString(req.Output, "started\n")
		cancel()
		<-ctx.Done()
		return opsapi.ExecResult{}, opsapi.E("fake.Exec", "", opsapi.ErrCanceled, ctx.Err())
	})
	_, err = bashExecute(t, ws, ctx, `{"command":"x"}`, nil)
	if err == nil || err.Error() != "started\n\n\nCommand aborted" {
		t.Errorf("canceled ctx: %v", err)
	}

	// Already aborted: nothing runs.
	ws = newBashFakeWS(emit(opsapi.ExecResult{}))
	_, err = bashExecute(t, ws, ctx, `{"command":"x"}`, nil)
	if err == nil || err.Error() != "Command aborted" || len(ws.requests()) != 0 {
		t.Errorf("pre-aborted: %v, %d requests", err, len(ws.requests()))
	}
}

func TestBashExecErrors(t *testing.T) {
	ws := newBashFakeWS(func(_ context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
		return opsapi.ExecResult{}, opsapi.E("local.Exec", req.Cwd, opsapi.ErrNotExist, nil)
	})
	got := resultText(t, bashCall(t, ws, Options{Cwd: "sub/dir"}, `{"command":"ls"}`))
	if got != "Working directory does not exist: /ws/sub/dir\nCannot execute bash commands." {
		t.Errorf("missing cwd: %q", got)
	}

	ws = newBashFakeWS(func(_ context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
		_, _ = io.WriteString(req.Output, "dropped")
		return opsapi.ExecResult{}, errors.New("spawn /bin/bash ENOENT")
	})
	r := bashCall(t, ws, Options{}, `{"command":"ls"}`)
	if got := resultText(t, r); got != "spawn /bin/bash ENOENT" || !r.IsError {
		t.Errorf("other error: %q", got)
	}
}

func TestBashInvalidTimeout(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"0", "Invalid timeout: must be a finite number of seconds"},
		{"-1", "Invalid timeout: must be a finite number of seconds"},
		{"2147483.648", "Invalid timeout: maximum is 2147483.647 seconds"},
		{"1e9", "Invalid timeout: maximum is 2147483.647 seconds"},
	} {
		ws := newBashFakeWS(emit(opsapi.ExecResult{}))
		r := bashCall(t, ws, Options{}, `{"command":"x","timeout":`+tc.arg+`}`)
		if got := resultText(t, r); got != tc.want || !r.IsError {
			t.Errorf("timeout %s: %q", tc.arg, got)
		}
		if n := len(ws.requests()); n != 0 {
			t.Errorf("timeout %s: the command ran", tc.arg)
		}
	}
	// JSON cannot carry Infinity or NaN; a number out of float64's range
	// is the closest thing, and is not finite.
	for _, raw := range []string{"1e999", "-1e999", `"Infinity"`, `"NaN"`, `"abc"`} {
		if _, _, err := parseTimeout(json.RawMessage(raw)); !errors.Is(err, errTimeoutNotFinite) {
			t.Errorf("parseTimeout(%s) = %v", raw, err)
		}
	}
	if d, text, err := parseTimeout(json.RawMessage("2147483.647")); err != nil || text != "2147483.647" || d != 2147483647*time.Millisecond {
		t.Errorf("maximum: %v %q %v", d, text, err)
	}
	if d, text, err := parseTimeout(json.RawMessage("null")); err != nil || d != 0 || text != "" {
		t.Errorf("null: %v %q %v", d, text, err)
	}
}

func TestFormatJSNumber(t *testing.T) {
	for v, want := range map[float64]string{
		1: "1", 0.5: "0.5", 2147483.647: "2147483.647", 1e-7: "1e-7", 0.000001: "0.000001",
		1.5e-9: "1.5e-9", 1e21: "1e+21", 123456789: "123456789",
	} {
		if got := formatJSNumber(v); got != want {
			t.Errorf("formatJSNumber(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestBashSpillUnavailable(t *testing.T) {
	full := seqLines(1, 3000)
	want := strings.TrimSuffix(seqLines(1001, 3000), "\n") + "\n\n[Showing lines 1001-3000 of 3000.]"
	check := func(name string, ws opsapi.Workspace) {
		t.Helper()
		// Inside the workspace (OutputDir), the workspace must be writable.
		r := bashCall(t, ws, Options{OutputDir: ".broker/output"}, `{"command":"seq 3000"}`)
		if got := resultText(t, r); got != want || r.IsError {
			t.Errorf("%s: text ends %q", name, got[max(0, len(got)-80):])
		}
		if d, ok := r.Details.(*BashDetails); !ok || d.FullOutputPath != "" || d.Truncation == nil {
			t.Errorf("%s: details %#v", name, r.Details)
		}
	}

	check("no write operations", &bashExecOnly{root: "/ws", script: emit(opsapi.ExecResult{}, lineChunks(full)...)})

	ws := newBashFakeWS(emit(opsapi.ExecResult{}, lineChunks(full)...))
	ws.mkdirErr = opsapi.E("fake.Mkdir", "/ws/.broker", opsapi.ErrPermission, nil)
	check("mkdir fails", ws)

	ws = newBashFakeWS(emit(opsapi.ExecResult{}, lineChunks(full)...))
	ws.writeErr = opsapi.E("fake.WriteFile", "", opsapi.ErrTooLarge, nil)
	check("write fails", ws)
	if len(ws.files) != 0 {
		t.Errorf("write fails: files %v", ws.files)
	}
}

func TestBashOutputDir(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"logs/bash", "/ws/logs/bash/"},
		{"/ws/abs", "/ws/abs/"},
	} {
		ws := newBashFakeWS(emit(opsapi.ExecResult{}, seqLines(1, 3000)))
		r := bashCall(t, ws, Options{OutputDir: tc.dir}, `{"command":"x"}`)
		d := r.Details.(*BashDetails)
		if !strings.HasPrefix(d.FullOutputPath, tc.want) {
			t.Errorf("OutputDir %q: path %q", tc.dir, d.FullOutputPath)
		}
		if _, ok := ws.file(d.FullOutputPath); !ok {
			t.Errorf("OutputDir %q: no file at %q", tc.dir, d.FullOutputPath)
		}
	}
}

// Output written after Exec returned (a backend breaking its contract, or
// a detached child) changes neither the result nor the saved file.
func TestBashLateWritesIgnored(t *testing.T) {
	var out io.Writer
	ws := newBashFakeWS(func(_ context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
		out = req.Output
		_, _ = io.WriteString(req.Output, seqLines(1, 3000))
		return opsapi.ExecResult{}, nil
	})
	var updates []Result
	r, err := bashExecute(t, ws, context.Background(), `{"command":"x"}`, func(u Result) { updates = append(updates, u) })
	if err != nil {
		t.Fatal(err)
	}
	n := len(updates)
	if k, err := io.WriteString(out, "late\n"); k != 5 || err != nil {
		t.Errorf("late write = %d, %v", k, err)
	}
	time.Sleep(2 * bashUpdateThrottle)
	if len(updates) != n {
		t.Error("an update arrived after Execute returned")
	}
	d := r.Details.(*BashDetails)
	if data, _ := ws.file(d.FullOutputPath); bytes.Contains(data, []byte("late")) {
		t.Error("late output reached the spill file")
	}
	if strings.Contains(resultText(t, r), "late") {
		t.Error("late output reached the result")
	}
}

func TestBashStreamingUpdates(t *testing.T) {
	const chunks = 5000
	const span = time.Second
	ws := newBashFakeWS(func(_ context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
		start := time.Now()
		for i := 1; i <= chunks; i++ {
			// Spread the chunks over span, catching up when behind.
			if d := time.Until(start.Add(span * time.Duration(i) / chunks)); d > 0 {
				time.Sleep(d)
			}
			_, _ = fmt.Fprintf(req.Output, "chunk %d\n", i)
		}
		return opsapi.ExecResult{}, nil
	})
	var (
		mu      sync.Mutex
		updates []Result
		inside  bool
		overlap bool
		done    bool
		late    bool
	)
	onUpdate := func(u Result) {
		mu.Lock()
		if inside {
			overlap = true
		}
		inside = true
		if done {
			late = true
		}
		updates = append(updates, u)
		mu.Unlock()
		time.Sleep(time.Millisecond) // a slow consumer must not break ordering
		mu.Lock()
		inside = false
		mu.Unlock()
	}
	r, err := bashExecute(t, ws, context.Background(), `{"command":"x"}`, onUpdate)
	mu.Lock()
	done = true
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * bashUpdateThrottle)

	mu.Lock()
	defer mu.Unlock()
	if late || overlap {
		t.Errorf("late %v, overlapping %v", late, overlap)
	}
	if len(updates) < 2 || len(updates) >= 25 {
		t.Fatalf("%d updates for %d chunks over %v", len(updates), chunks, span)
	}
	if first := updates[0]; len(first.Content) != 0 || first.Details != nil {
		t.Errorf("first update = %+v, want empty", first)
	}
	final := resultText(t, r)
	var prevLines int
	for i, u := range updates[1:] {
		if len(u.Content) != 1 {
			t.Fatalf("update %d content %+v", i+1, u.Content)
		}
		text := u.Content[0].Text
		if !strings.HasPrefix(text, "chunk ") {
			t.Errorf("update %d starts %q", i+1, text[:min(len(text), 20)])
		}
		// Each update is a tail of the output so far; the tails only grow.
		d, _ := u.Details.(*BashDetails)
		lines := strings.Count(text, "\n")
		if d != nil && d.Truncation != nil {
			lines = d.Truncation.TotalLines
			if d.FullOutputPath == "" {
				t.Errorf("update %d: truncated without a path", i+1)
			}
		}
		if lines < prevLines {
			t.Errorf("update %d went back from %d to %d lines", i+1, prevLines, lines)
		}
		prevLines = lines
	}
	if !strings.Contains(final, "[Showing lines 3001-5000 of 5000. Full output: ") {
		t.Errorf("final text ends %q", final[len(final)-100:])
	}
}

func TestBashNoUpdateFunc(t *testing.T) {
	ws := newBashFakeWS(emit(opsapi.ExecResult{}, "ok\n"))
	r, err := bashExecute(t, ws, context.Background(), `{"command":"x"}`, nil)
	if err != nil || resultText(t, r) != "ok\n" {
		t.Errorf("%+v, %v", r, err)
	}
}

// Commands run concurrently on one toolbox each get their own file.
func TestBashConcurrentSpills(t *testing.T) {
	ws := newBashFakeWS(func(_ context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
		_, _ = io.WriteString(req.Output, req.Command+"\n"+seqLines(1, 3000))
		return opsapi.ExecResult{}, nil
	})
	tb := New(ws, Options{Logger: testutil.Logger(t)})
	t.Cleanup(func() { _ = tb.Close() })
	var wg sync.WaitGroup
	paths := make([]string, 8)
	for i := range paths {
		wg.Go(func() {
			r := tb.Call(context.Background(), "bash", json.RawMessage(fmt.Sprintf(`{"command":"cmd%d"}`, i)), nil)
			if d, ok := r.Details.(*BashDetails); ok {
				paths[i] = d.FullOutputPath
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, p := range paths {
		data, ok := spilled(tb, p)
		if !ok || !bytes.HasPrefix(data, fmt.Appendf(nil, "cmd%d\n", i)) || seen[p] {
			t.Errorf("call %d: path %q (exists %v, duplicate %v)", i, p, ok, seen[p])
		}
		seen[p] = true
	}
}
