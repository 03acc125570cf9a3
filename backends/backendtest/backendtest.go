package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Options configure a run of the suite.
type Options struct {
	// New returns a fresh, empty workspace and registers its Destroy with
	// t.Cleanup. It is called once per case.
	New func(t *testing.T) opsapi.Workspace
	// Confined says every path must stay inside the workspace root
	// (ErrPermission otherwise). False when a container or an account is
	// the boundary; the confinement cases are then skipped.
	Confined bool
	// NoStdin and NoSignals, when set, say why the workspace's transport
	// cannot carry ExecRequest.Stdin or Signals: the cases that need them
	// skip with that reason.
	NoStdin, NoSignals string
	// NoTTY, when set, says why the workspace's transport cannot run a
	// command on a terminal (ExecRequest.TTY, Resize): the tty cases skip
	// with that reason.
	NoTTY string
}

// Run runs every case of the suite against the backend o.New builds.
func Run(t *testing.T, o Options) {
	if o.New == nil {
		t.Fatal("backendtest: Options.New is nil")
	}
	s := &suite{o: o}
	t.Run("ops", func(t *testing.T) {
		t.Run("files", s.files)
		t.Run("search", s.search)
		t.Run("exec", s.exec)
		t.Run("stdio", s.stdio)
		t.Run("tty", s.tty)
		t.Run("tree", s.tree)
	})
	t.Run("confine", s.confine)
	t.Run("tools", func(t *testing.T) {
		t.Run("toolbox", s.toolbox)
		t.Run("read", s.toolRead)
		t.Run("write", s.toolWrite)
		t.Run("edit", s.toolEdit)
		t.Run("fuzzy", s.toolFuzzy)
		t.Run("queue", s.toolQueue)
		t.Run("bash", s.toolBash)
		t.Run("grep", s.toolGrep)
		t.Run("find", s.toolFind)
		t.Run("ls", s.toolLs)
	})
	// Last and one at a time: heap measurements must see only their case.
	t.Run("heavy", s.heavy)
}

type suite struct{ o Options }

// capability returns ws as T, or skips the test when the workspace lacks
// that interface. It is the only place a missing ability skips.
func capability[T any](t *testing.T, ws opsapi.Workspace) T {
	t.Helper()
	c, ok := ws.(T)
	if !ok {
		var zero *T
		t.Skipf("workspace %T lacks %s", ws, strings.TrimPrefix(fmt.Sprintf("%T", zero), "*"))
	}
	return c
}

// parallel marks t parallel and returns a fresh full workspace.
func (s *suite) parallel(t *testing.T) opsapi.Operations {
	t.Helper()
	t.Parallel()
	return s.serial(t)
}

// serial returns a fresh full workspace without marking t parallel.
func (s *suite) serial(t *testing.T) opsapi.Operations {
	t.Helper()
	return capability[opsapi.Operations](t, s.o.New(t))
}

// must fails the test on a non-nil error.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantKind fails unless err is of kind.
func wantKind(t testing.TB, err, kind error) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want %v", kind)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error = %v (kind %v), want errors.Is %v", err, opsapi.KindOf(err), kind)
	}
}

func eq[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %#v, want %#v", what, got, want)
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// put writes content to p through the workspace, creating parents.
func put(t *testing.T, ws opsapi.Operations, p, content string) {
	t.Helper()
	ctx := ctxOf(t)
	if dir := path.Dir(p); dir != "." && dir != "/" {
		must(t, ws.Mkdir(ctx, dir))
	}
	must(t, ws.WriteFile(ctx, p, strings.NewReader(content)))
}

// get reads p through the workspace.
func get(t *testing.T, ws opsapi.ReadOperations, p string) string {
	t.Helper()
	b, err := readAll(ctxOf(t), ws, p)
	must(t, err)
	return string(b)
}

func readAll(ctx context.Context, ws opsapi.ReadOperations, p string) ([]byte, error) {
	rc, err := ws.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// run executes cmd in the workspace root and returns its output and result;
// it fails the test when Exec itself errors.
func run(t *testing.T, ws opsapi.BashOperations, cmd string) (string, opsapi.ExecResult) {
	t.Helper()
	var out bytes.Buffer
	res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: cmd, Output: &out, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return out.String(), res
}

// sh executes cmd and requires exit status 0.
func sh(t *testing.T, ws opsapi.BashOperations, cmd string) string {
	t.Helper()
	out, res := run(t, ws, cmd)
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d (%s), output:\n%s", cmd, res.ExitCode, res.Signal, out)
	}
	return out
}

// names returns the sorted names of a directory listing.
func names(t *testing.T, ws opsapi.LsOperations, dir string) []string {
	t.Helper()
	infos, err := ws.ReadDir(ctxOf(t), dir)
	must(t, err)
	var n []string
	for _, fi := range infos {
		n = append(n, fi.Name)
	}
	slices.Sort(n)
	return n
}

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
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

// shq quotes s for a POSIX shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
