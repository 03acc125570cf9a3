package agentsock

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// proc is a local command as a Process.
type proc struct {
	cmd   *exec.Cmd
	out   io.Reader
	stdin io.WriteCloser
}

func (p *proc) Stdout() io.Reader     { return p.out }
func (p *proc) Stdin() io.WriteCloser { return p.stdin }
func (p *proc) Close() error          { return p.stdin.Close() }

// localStart runs argv on this host, as the box would; the test ends it.
func localStart(t *testing.T) StartFunc {
	return func(ctx context.Context, argv []string, stderr io.Writer) (Process, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stderr = stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return &proc{cmd: cmd, out: out, stdin: stdin}, nil
	}
}

// TestStartConnects: the real agent, given its keys on stdin, connects
// to the socket in the run directory and answers; the directory is left
// the broker's, closed to others and emptied of what a box left there.
func TestStartConnects(t *testing.T) {
	bin := testutil.AgentBinary(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "left"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	c, err := Start(t.Context(), Dir{Host: dir, Box: dir}, bin, localStart(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Identity(t.Context()); err != nil {
		t.Fatalf("the agent does not answer: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run directory: %v, %v, want mode 0755", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "left")); !os.IsNotExist(err) {
		t.Errorf("a leftover file is still there: %v", err)
	}
}

// TestStartFailsWithWhatTheAgentSaid: a command that exits instead of
// connecting ends the wait at once, its words in the error.
func TestStartFailsWithWhatTheAgentSaid(t *testing.T) {
	testutil.RequireCommand(t, "sh")
	start := localStart(t)
	notAgent := func(ctx context.Context, argv []string, stderr io.Writer) (Process, error) {
		return start(ctx, []string{"sh", "-c", "echo oops; echo broken >&2"}, stderr)
	}
	dir := t.TempDir()
	_, err := Start(t.Context(), Dir{Host: dir, Box: dir}, "/nonexistent", notAgent)
	if err == nil || !strings.Contains(err.Error(), `the agent did not start (unexpected output): "oops\n"`) {
		t.Fatalf("Start of a command that is no agent: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the socket was left behind: %v", entries)
	}
}

// TestStartFailsWithWhatTheAgentSaidBeforeItsKeys: a command that has
// already exited when its keys are sent (a broken pipe) still fails with
// what it said, not with the pipe.
func TestStartFailsWithWhatTheAgentSaidBeforeItsKeys(t *testing.T) {
	testutil.RequireCommand(t, "sh")
	start := localStart(t)
	exited := func(ctx context.Context, argv []string, stderr io.Writer) (Process, error) {
		p, err := start(ctx, []string{"sh", "-c", "echo oops"}, stderr)
		if err != nil {
			return nil, err
		}
		_, err = p.(*proc).cmd.Process.Wait()
		return p, err
	}
	_, err := Start(t.Context(), Dir{Host: t.TempDir(), Box: "/x"}, "/nonexistent", exited)
	if err == nil || !strings.Contains(err.Error(), `the agent did not start (unexpected output): "oops\n"`) {
		t.Fatalf("Start of a command that exited first: %v", err)
	}
}

// TestStartRefusesAFileForADirectory: the run directory must be one.
func TestStartRefusesAFileForADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Start(t.Context(), Dir{Host: f, Box: f}, "/nonexistent", localStart(t))
	if err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("Start in a file: %v", err)
	}
}
