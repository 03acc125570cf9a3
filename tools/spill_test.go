package tools

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// seqWorkspace is a fake workspace whose bash prints lines 1..n, n being
// the command's length (so each call can choose its output size).
type seqWorkspace struct{ *fakeWorkspace }

func (w seqWorkspace) Exec(_ context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	_, _ = io.WriteString(req.Output, seqLines(1, len(req.Command)))
	return opsapi.ExecResult{}, nil
}

func spillToolbox(t *testing.T, opts Options) (*fakeWorkspace, *Toolbox) {
	t.Helper()
	ws := newFakeWorkspace(t)
	ws.addFile("/w/a.txt", "a\n")
	opts.Logger = testutil.Logger(t)
	if opts.SpillBase == "" {
		opts.SpillBase = t.TempDir()
	}
	tb := New(seqWorkspace{ws}, opts)
	t.Cleanup(func() { _ = tb.Close() })
	return ws, tb
}

// bashSpill runs a command printing n lines and returns the full-output path.
func bashSpill(t *testing.T, tb *Toolbox, n int) string {
	t.Helper()
	r := tb.Call(context.Background(), "bash", json.RawMessage(`{"command":"`+strings.Repeat("x", n)+`"}`), nil)
	d, ok := r.Details.(*BashDetails)
	if r.IsError || !ok || !spillPathRE.MatchString(d.FullOutputPath) {
		t.Fatalf("bash: %+v", r)
	}
	return d.FullOutputPath
}

func readCall(t *testing.T, tb *Toolbox, args string) Result {
	t.Helper()
	return tb.Call(context.Background(), "read", json.RawMessage(args), nil)
}

// The full output is out of the workspace's tree (ls shows only the
// user's file; nothing was written there) and the read tool reaches it.
func TestFullOutputOutOfTreeAndReadable(t *testing.T) {
	ws, tb := spillToolbox(t, Options{})
	p := bashSpill(t, tb, 3000)
	for _, c := range ws.callLog() {
		if strings.HasPrefix(c, "WriteFile") || strings.HasPrefix(c, "Mkdir") {
			t.Errorf("the workspace was written: %s", c)
		}
	}
	if got := resultText(t, tb.Call(context.Background(), "ls", json.RawMessage(`{}`), nil)); got != "a.txt" {
		t.Errorf("ls = %q", got)
	}
	r := readCall(t, tb, `{"path":"`+p+`","offset":2999}`)
	if got := resultText(t, r); r.IsError || got != "2999\n3000\n" {
		t.Errorf("read = %q (isError %v)", got, r.IsError)
	}
	r = readCall(t, tb, `{"path":"@`+p+`","limit":2}`)
	if got := resultText(t, r); r.IsError || !strings.HasPrefix(got, "1\n2\n\n[2999 more lines in file. Use offset=3 to continue.]") {
		t.Errorf("read with @ = %q", got)
	}
	// The read is not a workspace path for the policy to match.
	if acc := tb.tools["read"].(Describer).Access(json.RawMessage(`{"path":"` + p + `"}`)); len(acc.Read) != 0 {
		t.Errorf("access %+v", acc)
	}
}

// Only the exact shape of a full-output path is looked up in the store.
func TestFullOutputPathShape(t *testing.T) {
	_, tb := spillToolbox(t, Options{})
	p := bashSpill(t, tb, 3000)
	for _, bad := range []string{
		SpillDir + "/../etc/passwd",
		SpillDir + "/bash-0123.log",
		SpillDir + "/sub/" + filepath.Base(p),
		"/w/" + p,
	} {
		if _, ok := spillName(bad); ok {
			t.Errorf("%q taken for a full-output path", bad)
		}
	}
	missing := SpillDir + "/bash-0123456789abcdef.log"
	r := readCall(t, tb, `{"path":"`+missing+`"}`)
	if got := resultText(t, r); !r.IsError || got != "ENOENT: no such file or directory, access '"+missing+"'" {
		t.Errorf("read of a missing file = %q", got)
	}
}

// Close removes the files and the directory; a later read finds nothing
// and a later truncated command names no file.
func TestFullOutputClose(t *testing.T) {
	base := t.TempDir()
	_, tb := spillToolbox(t, Options{SpillBase: base})
	p := bashSpill(t, tb, 3000)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(base); len(left) != 0 {
		t.Errorf("left after Close: %v", left)
	}
	if r := readCall(t, tb, `{"path":"`+p+`"}`); !r.IsError {
		t.Errorf("read after Close: %q", resultText(t, r))
	}
	r := tb.Call(context.Background(), "bash", json.RawMessage(`{"command":"`+strings.Repeat("x", 3000)+`"}`), nil)
	if d, ok := r.Details.(*BashDetails); !ok || d.FullOutputPath != "" || !strings.HasSuffix(resultText(t, r), "of 3000.]") {
		t.Errorf("after Close: %q %+v", resultText(t, r)[len(resultText(t, r))-40:], r.Details)
	}
}

// The store is bounded: a new file evicts the oldest once over the bound,
// and a file that alone reaches it is cut with a last line saying so.
func TestFullOutputBound(t *testing.T) {
	const bound = 40000 // seq 1..3000 is 13893 bytes
	_, tb := spillToolbox(t, Options{MaxSpillBytes: bound})
	first := bashSpill(t, tb, 3000)
	second := bashSpill(t, tb, 3000)
	third := bashSpill(t, tb, 3000) // 41679 bytes in all: the first goes
	if _, ok := spilled(tb, first); ok {
		t.Error("the oldest file was kept over the bound")
	}
	for _, p := range []string{second, third} {
		if data, ok := spilled(tb, p); !ok || string(data) != seqLines(1, 3000) {
			t.Errorf("%s: %d bytes", p, len(data))
		}
	}
	big := bashSpill(t, tb, 10000) // 48894 bytes alone
	data, ok := spilled(tb, big)
	if !ok || len(data) != bound+len(spillCutNotice) || !strings.HasSuffix(string(data), spillCutNotice) ||
		!strings.HasPrefix(string(data), seqLines(1, 1000)) {
		t.Errorf("cut file: %d bytes, ends %q", len(data), data[max(0, len(data)-120):])
	}
	if _, ok := spilled(tb, third); ok {
		t.Error("older files kept beside a file at the bound")
	}
}

// A store that cannot be made costs the file, never the command.
func TestFullOutputStoreUnavailable(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, tb := spillToolbox(t, Options{SpillBase: notDir})
	r := tb.Call(context.Background(), "bash", json.RawMessage(`{"command":"`+strings.Repeat("x", 3000)+`"}`), nil)
	want := strings.TrimSuffix(seqLines(1001, 3000), "\n") + "\n\n[Showing lines 1001-3000 of 3000.]"
	if got := resultText(t, r); r.IsError || got != want {
		t.Errorf("text ends %q", got[max(0, len(got)-80):])
	}
}

// TestFullOutputBudgetAcrossWorkspaces: workspaces sharing a budget
// cannot together hold more than it on the broker's disk. A file past it
// evicts its own workspace's oldest files, never another's, and is
// otherwise cut; Close gives its share back.
func TestFullOutputBudgetAcrossWorkspaces(t *testing.T) {
	const limit = 50000 // seq 1..3000 is 13893 bytes
	base := t.TempDir()
	budget := NewSpillBudget(limit)
	_, a := spillToolbox(t, Options{SpillBase: base, SpillBudget: budget})
	_, b := spillToolbox(t, Options{SpillBase: base, SpillBudget: budget})
	var aFiles []string
	for range 3 {
		aFiles = append(aFiles, bashSpill(t, a, 3000))
	}
	cut := bashSpill(t, b, 3000)
	data, ok := spilled(b, cut)
	if want := limit - 3*13893; !ok || len(data) != want+len(spillCutNotice) || !strings.HasSuffix(string(data), spillCutNotice) {
		t.Errorf("b's file past the budget: %d bytes, want %d and the notice", len(data), want)
	}
	for _, p := range aFiles {
		if _, ok := spilled(a, p); !ok {
			t.Errorf("b's file evicted a's %s", p)
		}
	}
	// a makes way from its own files.
	next := bashSpill(t, a, 3000)
	if data, ok := spilled(a, next); !ok || string(data) != seqLines(1, 3000) {
		t.Errorf("a's next file: %d bytes", len(data))
	}
	if _, ok := spilled(a, aFiles[0]); ok {
		t.Error("a's oldest file kept past the budget")
	}
	if used := budget.Used(); used > limit || used != a.SpillBytes()+b.SpillBytes() {
		t.Errorf("budget holds %d (a %d, b %d), bound %d", used, a.SpillBytes(), b.SpillBytes(), limit)
	}
	if onDisk := dirBytes(t, base); onDisk > limit+int64(len(spillCutNotice)) {
		t.Errorf("%d bytes on disk, bound %d", onDisk, limit)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if used := budget.Used(); used != b.SpillBytes() {
		t.Errorf("after a's Close the budget holds %d, want b's %d", used, b.SpillBytes())
	}
}

// dirBytes adds up the sizes of the regular files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
