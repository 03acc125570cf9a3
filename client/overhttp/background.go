package overhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces/bgproc"
)

// backgroundCases covers background processes through the broker and the
// client: handles, logs by offset, stdin, signals and kills, on whatever
// backend the broker serves.
func backgroundCases(t *testing.T, newWS func(t *testing.T) *client.Workspace) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, ws *client.Workspace)
	}{
		{"Server_in_the_background_answers_a_second_command", bgServerAnswers},
		{"Logs_resume_from_an_offset_with_nothing_lost_or_doubled", bgLogsResume},
		{"A_1GiB_log_stays_within_its_bound", bgLogBound},
		{"Stdin_reaches_cat_and_its_close_ends_it", bgStdin},
		{"Signals_reach_the_tree_and_a_kill_is_128_plus_N", bgSignals},
		{"A_signal_right_after_the_start_lands", bgSignalAtStart},
		{"Remove_kills_the_whole_tree", bgRemoveKillsTree},
		{"Wait_times_out_as_an_answer_and_unknown_ids_are_not_found", bgWaitAndUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newWS(t))
		})
	}
}

func bgServerAnswers(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	port := 20000 + rand.IntN(20000)
	mustExec(t, ws, "mkdir -p srv/repo && cd srv/repo && git init -q && git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m first")
	p, err := ws.StartProcess(ctx, wire.StartProcessRequest{Tag: "git-daemon", ExecRequest: wire.ExecRequest{
		Command: fmt.Sprintf("exec git daemon --listen=127.0.0.1 --port=%d --base-path=srv --export-all --reuseaddr --informative-errors", port)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.State != wire.ProcessRunning || p.Tag != "git-daemon" || !strings.HasPrefix(p.ID, "p-") {
		t.Fatalf("started process %+v", p)
	}
	out := mustExec(t, ws, fmt.Sprintf(
		"for i in $(seq 100); do git ls-remote git://127.0.0.1:%d/repo 2>/dev/null && exit 0; sleep 0.1; done; exit 1", port))
	if !strings.Contains(out, "HEAD") {
		t.Fatalf("the server did not answer: %q", out)
	}
	list, err := ws.BackgroundProcesses(ctx)
	if err != nil || len(list) != 1 || list[0].ID != p.ID || list[0].State != wire.ProcessRunning {
		t.Fatalf("listed %+v, %v; want the one running process", list, err)
	}
	end, err := ws.RemoveProcess(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if end.State != wire.ProcessExited || end.Result == nil || !end.Result.Canceled {
		t.Fatalf("removed process ended as %+v, want exited and canceled", end)
	}
	if _, err := ws.Process(ctx, p.ID); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("a removed process is still found: %v", err)
	}
}

func bgLogsResume(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	p := start(t, ws, wire.StartProcessRequest{ExecRequest: wire.ExecRequest{
		Command: "for i in $(seq 3000); do echo line-$i; (( i % 300 )) || sleep 0.05; done"}})
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "line-%d\n", i)
	}
	var got bytes.Buffer
	off := int64(0)
	for attempt := 0; ; attempt++ {
		// Each connection is dropped after a few lines, as a client
		// losing its network would; the next resumes at off.
		cctx, cancel := context.WithCancel(ctx)
		seen := 0
		last, err := ws.ProcessLogs(cctx, p.ID, off, true, func(l wire.LogLine) error {
			if l.Type == wire.LineDropped {
				t.Fatalf("a 4 MiB log dropped bytes of a 30 KB output: %+v", l)
			}
			if l.Offset != off {
				t.Fatalf("output line at offset %d, want %d", l.Offset, off)
			}
			got.Write(l.Data)
			off += int64(len(l.Data))
			if seen++; seen == 3 {
				cancel()
			}
			return nil
		})
		cancel()
		if err == nil {
			if last.Type != wire.LineExit || last.Result == nil || last.Result.ExitCode != 0 || last.Offset != off {
				t.Fatalf("last line %+v at offset %d", last, off)
			}
			break
		}
		if !errors.Is(err, opsapi.ErrCanceled) {
			t.Fatalf("reading logs: %v", err)
		}
		if attempt > 10000 {
			t.Fatal("the logs never ended")
		}
	}
	if got.String() != want.String() {
		t.Fatalf("resumed logs differ from the output: %d bytes, want %d", got.Len(), want.Len())
	}
}

func bgLogBound(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	p := start(t, ws, wire.StartProcessRequest{ExecRequest: wire.ExecRequest{
		Command: "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 1073741824; echo; echo tail-marker"}})
	end, err := ws.WaitProcess(ctx, p.ID, 600)
	if err != nil {
		t.Fatal(err)
	}
	if end.State != wire.ProcessExited || end.Result.ExitCode != 0 {
		t.Fatalf("ended as %+v", end)
	}
	const size = bgproc.DefaultLogBytes
	if w := end.Output.Written; w != 1<<30+len64("\ntail-marker\n") {
		t.Fatalf("written %d bytes, want %d", w, 1<<30+len64("\ntail-marker\n"))
	}
	if end.Output.First != end.Output.Written-size {
		t.Fatalf("log holds [%d, %d), want the last %d bytes", end.Output.First, end.Output.Written, size)
	}
	var held bytes.Buffer
	var dropped *wire.LogLine
	_, err = ws.ProcessLogs(ctx, p.ID, 0, false, func(l wire.LogLine) error {
		if l.Type == wire.LineDropped {
			dropped = &l
		}
		held.Write(l.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dropped == nil || dropped.Offset != 0 || dropped.Next != end.Output.First {
		t.Fatalf("dropped line %+v, want [0, %d)", dropped, end.Output.First)
	}
	if held.Len() != size || !strings.HasSuffix(held.String(), "\ntail-marker\n") {
		t.Fatalf("read %d bytes ending %q, want %d ending in the marker", held.Len(), tail(held.Bytes()), size)
	}
}

func bgStdin(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	p := start(t, ws, wire.StartProcessRequest{Stdin: true, ExecRequest: wire.ExecRequest{Command: "cat; echo cat-done"}})
	if !p.Stdin {
		t.Fatalf("stdin not open: %+v", p)
	}
	for _, s := range []string{"hello\n", "world\n"} {
		if n, err := ws.WriteStdin(ctx, p.ID, strings.NewReader(s), false); err != nil || n != int64(len(s)) {
			t.Fatalf("writing stdin: %d, %v", n, err)
		}
	}
	if got, _ := ws.WaitProcess(ctx, p.ID, 0.3); got.State != wire.ProcessRunning {
		t.Fatalf("cat ended before its stdin was closed: %+v", got)
	}
	if err := ws.CloseStdin(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	end, err := ws.WaitProcess(ctx, p.ID, 60)
	if err != nil || end.State != wire.ProcessExited || end.Result.ExitCode != 0 {
		t.Fatalf("after closing stdin: %+v, %v", end, err)
	}
	if out := logs(t, ws, p.ID); out != "hello\nworld\ncat-done\n" {
		t.Fatalf("output %q", out)
	}
	if _, err := ws.WriteStdin(ctx, p.ID, strings.NewReader("late"), false); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("stdin to an ended process: %v, want ErrInvalid", err)
	}
}

func bgSignals(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	p := start(t, ws, wire.StartProcessRequest{ExecRequest: wire.ExecRequest{
		Command: "trap 'echo got-int' INT; echo ready; while :; do sleep 0.1; done"}})
	waitOutput(t, ws, p.ID, "ready")
	if err := ws.SignalProcess(ctx, p.ID, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, ws, p.ID, "got-int")
	if err := ws.SignalProcess(ctx, p.ID, "SIGSEGV"); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("an unlisted signal: %v, want ErrInvalid", err)
	}
	if err := ws.SignalProcess(ctx, p.ID, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	end, err := ws.WaitProcess(ctx, p.ID, 60)
	if err != nil || end.State != wire.ProcessExited || end.Result.ExitCode != 137 || end.Result.Signal != "SIGKILL" {
		t.Fatalf("after SIGKILL: %+v, %v", end, err)
	}
	if err := ws.SignalProcess(ctx, p.ID, "SIGTERM"); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("a signal to an ended process: %v, want ErrInvalid", err)
	}
}

// bgSignalAtStart signals a process the moment its start is answered,
// before its command may have been exec'd: the signal must not be lost.
func bgSignalAtStart(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	for i := range 5 {
		p := start(t, ws, wire.StartProcessRequest{ExecRequest: wire.ExecRequest{Command: "sleep 60"}})
		if err := ws.SignalProcess(ctx, p.ID, "SIGTERM"); err != nil {
			t.Fatal(err)
		}
		end, err := ws.WaitProcess(ctx, p.ID, 20)
		if err != nil || end.State != wire.ProcessExited || end.Result.ExitCode != 143 {
			t.Fatalf("round %d: 20 s after a SIGTERM sent at once: %+v, %v", i, end, err)
		}
	}
}

func bgRemoveKillsTree(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	mark := fmt.Sprintf("%d", 900000+rand.IntN(99999))
	p := start(t, ws, wire.StartProcessRequest{ExecRequest: wire.ExecRequest{
		Command: fmt.Sprintf("sleep %[1]s & env -i setsid sleep %[1]s & echo up; wait", mark)}})
	waitOutput(t, ws, p.ID, "up")
	// A process's cmdline is its arguments, NUL-separated; grep's '.'
	// takes the NUL.
	count := fmt.Sprintf("grep -las '^sleep.%s' /proc/[0-9]*/cmdline | wc -l", mark)
	// setsid forks and execs sleep: the second shows a moment after "up".
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := strings.TrimSpace(mustExec(t, ws, count))
		if got == "2" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%s sleeps running before the remove, want 2", got)
		}
	}
	if _, err := ws.RemoveProcess(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(mustExec(t, ws, count)); got != "0" {
		t.Fatalf("%s sleeps left after the remove, want 0", got)
	}
}

func bgWaitAndUnknown(t *testing.T, ws *client.Workspace) {
	ctx := testCtx(t)
	p := start(t, ws, wire.StartProcessRequest{ExecRequest: wire.ExecRequest{Command: "sleep 30", Timeout: 60}})
	begin := time.Now()
	got, err := ws.WaitProcess(ctx, p.ID, 0.2)
	if err != nil || got.State != wire.ProcessRunning || time.Since(begin) < 200*time.Millisecond {
		t.Fatalf("a short wait: %+v, %v after %v", got, err, time.Since(begin))
	}
	if _, err := ws.Process(ctx, "p-0000000000000000"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("an unknown id: %v", err)
	}
	if _, err := ws.StartProcess(ctx, wire.StartProcessRequest{ExecRequest: wire.ExecRequest{Command: "true", Cwd: "no/such/dir"}}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("a missing cwd: %v, want ErrNotExist at start", err)
	}
}

func len64(s string) int64 { return int64(len(s)) }

func tail(b []byte) []byte { return b[max(0, len(b)-40):] }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, ws *client.Workspace, req wire.StartProcessRequest) wire.BackgroundProcess {
	t.Helper()
	p, err := ws.StartProcess(testCtx(t), req)
	if err != nil {
		t.Fatalf("starting %q: %v", req.Command, err)
	}
	t.Cleanup(func() { _, _ = ws.RemoveProcess(context.Background(), p.ID) })
	return p
}

// mustExec runs command to a 0 exit and returns its output.
func mustExec(t *testing.T, ws *client.Workspace, command string) string {
	t.Helper()
	var out bytes.Buffer
	res, err := ws.Exec(testCtx(t), opsapi.ExecRequest{Command: command, Output: &out, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q: %+v, %v, output %q", command, res, err, out.String())
	}
	return out.String()
}

// logs is the whole output a process's log holds now.
func logs(t *testing.T, ws *client.Workspace, id string) string {
	t.Helper()
	var out bytes.Buffer
	if _, err := ws.ProcessLogs(testCtx(t), id, 0, false, func(l wire.LogLine) error {
		out.Write(l.Data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// waitOutput follows a process's log until it holds want.
func waitOutput(t *testing.T, ws *client.Workspace, id, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
	defer cancel()
	var out bytes.Buffer
	found := errors.New("found")
	_, err := ws.ProcessLogs(ctx, id, 0, true, func(l wire.LogLine) error {
		out.Write(l.Data)
		if strings.Contains(out.String(), want) {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("waiting for %q in the output (got %q): %v", want, out.String(), err)
	}
}
