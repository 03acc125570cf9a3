package cli

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestExecPassesStdin: what is piped to `broker exec` reaches the command
// (it used to be dropped for /dev/null).
func TestExecPassesStdin(t *testing.T) {
	url := startBroker(t, "s3cret")
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}
	out, _, _ := run(env, "", "ws", "create")
	id := strings.TrimSpace(out)
	in := strings.Repeat("a line of input\n", 10000)
	if out, errs, code := run(env, in, "exec", id, "--", "wc -l; sha256sum -"); code != 0 || !strings.HasPrefix(out, "10000\n") {
		t.Fatalf("exec with stdin: %d %q %q", code, out, errs)
	}
}

// TestBackgroundCommands: exec -d starts, ps lists, logs -f follows to the
// exit status, kill -s signals, kill removes.
func TestBackgroundCommands(t *testing.T) {
	url := startBroker(t, "s3cret")
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}
	out, _, _ := run(env, "", "ws", "create")
	id := strings.TrimSpace(out)

	out, errs, code := run(env, "", "exec", "-d", "-tag", "counter", id, "--", "for i in 1 2 3; do echo n$i; sleep 0.1; done; exit 5")
	proc := strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^p-[0-9a-f]{16}$`).MatchString(proc) {
		t.Fatalf("exec -d: %d %q %q", code, out, errs)
	}
	if out, _, code := run(env, "", "ps", id); code != 0 || !strings.Contains(out, proc) || !strings.Contains(out, "counter") {
		t.Fatalf("ps: %d %q", code, out)
	}
	if out, errs, code := run(env, "", "logs", "-f", id, proc); code != 5 || out != "n1\nn2\nn3\n" {
		t.Fatalf("logs -f: %d %q %q, want exit 5 and the three lines", code, out, errs)
	}
	if out, _, code := run(env, "", "logs", "-offset", "3", id, proc); code != 5 || out != "n2\nn3\n" {
		t.Fatalf("logs -offset 3: %d %q", code, out)
	}
	if out, _, _ := run(env, "", "ps", id); !strings.Contains(out, "exited(5)") {
		t.Fatalf("ps after the exit: %q", out)
	}

	out, _, _ = run(env, "", "exec", "-d", id, "--", "trap 'echo got-term; exit 0' TERM; while :; do sleep 0.1; done")
	proc = strings.TrimSpace(out)
	time.Sleep(300 * time.Millisecond) // let the trap be set
	if _, errs, code := run(env, "", "kill", "-s", "term", id, proc); code != 0 {
		t.Fatalf("kill -s term: %d %q", code, errs)
	}
	if out, _, code := run(env, "", "logs", "-f", id, proc); code != 0 || !strings.HasSuffix(out, "got-term\n") {
		t.Fatalf("logs after the signal: %d %q", code, out)
	}
	if _, errs, code := run(env, "", "kill", id, proc); code != 0 || !strings.Contains(errs, proc) {
		t.Fatalf("kill: %d %q", code, errs)
	}
	if _, errs, code := run(env, "", "logs", id, proc); code != 1 || !strings.Contains(errs, "no such background process") {
		t.Fatalf("logs of a removed process: %d %q", code, errs)
	}
}

// TestWorkspaceEnvCommands: ws create --env/--secret-env and ws env.
func TestWorkspaceEnvCommands(t *testing.T) {
	url := startBroker(t, "s3cret")
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}
	out, errs, code := run(env, "", "ws", "create", "--env", "GREETING=hello", "--secret-env", "KEY=k3y-v4lue")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("ws create: %d %q", code, errs)
	}
	if out, _, _ := run(env, "", "exec", id, "--", `echo "$GREETING $KEY"`); out != "hello [REDACTED:KEY]\n" {
		t.Fatalf("exec sees %q", out)
	}
	if out, errs, code := run(env, "", "ws", "env", id, "--env", "GREETING=bye"); code != 0 || out != "GREETING\n" {
		t.Fatalf("ws env: %d %q %q", code, out, errs)
	}
	if out, _, _ := run(env, "", "exec", id, "--", `echo "$GREETING ${KEY-gone}"`); out != "bye gone\n" {
		t.Fatalf("exec after ws env sees %q", out)
	}
}

// TestExecOnATerminal: exec -t with a terminal on stdin runs the command
// on a remote terminal of the local one's size; what is typed goes to it.
func TestExecOnATerminal(t *testing.T) {
	url := startBroker(t, "s3cret")
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir(), "TERM": "xterm-256color"}
	out, _, _ := run(env, "", "ws", "create")
	id := strings.TrimSpace(out)
	// A new terminal for each run: a run's reader of its stdin outlives
	// it in-process (a process would exit), and would take the next one's keys.
	onTTY := func(typed string, args ...string) (string, string, int) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		defer tty.Close()
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, ptmx) }() // the local echo, if any
		if _, err := ptmx.WriteString(typed); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr strings.Builder
		c := &CLI{Stdin: tty, Stdout: &stdout, Stderr: &stderr, Getenv: envMap(env)}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		code := c.Run(ctx, args)
		return stdout.String(), stderr.String(), code
	}
	if out, errs, code := onTTY("", "exec", "-t", id, "--", `test -t 0 && test -t 1 && stty size && echo "$TERM"`); code != 0 ||
		strings.ReplaceAll(out, "\r\n", "\n") != "30 100\nxterm-256color\n" {
		t.Fatalf("exec -t: %d %q %q", code, out, errs)
	}
	if out, errs, code := onTTY("echo hi-$((1+1))\rexit 4\r", "exec", "-t", id, "--", "bash --norc --noprofile -i"); code != 4 || !strings.Contains(out, "hi-2") {
		t.Fatalf("exec -t bash: %d %q %q", code, out, errs)
	}
}

// TestExecTerminalFromAPipe: exec -t whose stdin is a pipe (a script's)
// runs the command without a terminal and says so, so a shell fed from
// the pipe ends with its input instead of waiting for ever on a terminal
// that never ends.
func TestExecTerminalFromAPipe(t *testing.T) {
	url := startBroker(t, "s3cret")
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}
	out, _, _ := run(env, "", "ws", "create")
	id := strings.TrimSpace(out)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		_, _ = w.WriteString("echo hi-$((1+1))\n")
		w.Close()
	}()
	var stdout, stderr strings.Builder
	c := &CLI{Stdin: r, Stdout: &stdout, Stderr: &stderr, Getenv: envMap(env)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	code := c.Run(ctx, []string{"exec", "-t", id, "--", "bash"})
	if code != 0 || stdout.String() != "hi-2\n" || !strings.Contains(stderr.String(), "stdin is not a terminal") {
		t.Fatalf("exec -t from a pipe after %s: %d %q %q, want 0, hi-2 and a word that -t was ignored",
			time.Since(start).Round(time.Millisecond), code, stdout.String(), stderr.String())
	}
}
