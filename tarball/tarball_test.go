package tarball_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tarball"
)

var lim = tarball.Limits{MaxEntries: 1000, MaxBytes: 1 << 30}

// workspace is a real local workspace, and the directory it lives in (to
// check that nothing lands beside it).
func workspace(t *testing.T) (*local.Workspace, string) {
	t.Helper()
	state := t.TempDir()
	b, err := local.New(local.Config{StateDir: state}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.(opsapi.Destroyer).Destroy(context.Background()) })
	return ws.(*local.Workspace), state
}

func dest(ws *local.Workspace) tarball.Dest { return tarball.Dest{Files: ws, Tree: ws} }

func source(ws *local.Workspace) tarball.Source {
	return tarball.Source{ReadDir: ws.ReadDir, Open: ws.Open, Exact: true, Tree: ws}
}

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body))}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil && hdr.Size > 0 {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readHost(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRoundTrip: a tree lands with its modes and links, and comes back
// out, gzip and zstd, the same.
func TestRoundTrip(t *testing.T) {
	ws, _ := workspace(t)
	ctx := context.Background()
	tree := tarOf(t,
		entry{name: "repo/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "repo/bin/run.sh", typ: tar.TypeReg, body: "#!/bin/sh\necho hi\n", mode: 0o755},
		entry{name: "repo/src/main.go", typ: tar.TypeReg, body: "package main\n"},
		entry{name: "repo/node_modules/.bin/run", typ: tar.TypeSymlink, link: "../../bin/run.sh"},
		entry{name: "repo/ro/", typ: tar.TypeDir, mode: 0o555},
		entry{name: "repo/ro/file", typ: tar.TypeReg, body: "x"},
		entry{name: "./repo/empty", typ: tar.TypeReg},
	)
	rep, err := tarball.Extract(ctx, bytes.NewReader(tree), tarball.Auto, dest(ws), "in", lim)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 4 || rep.Dirs != 2 || rep.Links != 1 || len(rep.Refused) != 0 || rep.Bytes != 32 {
		t.Fatalf("report %+v", rep)
	}
	root := ws.Root()
	if got := readHost(t, filepath.Join(root, "in/repo/node_modules/.bin/run")); got != "#!/bin/sh\necho hi\n" {
		t.Errorf("through the link: %q", got)
	}
	for p, want := range map[string]fs.FileMode{"in/repo/bin/run.sh": 0o755, "in/repo/src/main.go": 0o644, "in/repo/ro": 0o555} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}

	for _, c := range []tarball.Compression{tarball.Gzip, tarball.Zstd, tarball.None} {
		var out bytes.Buffer
		rep, err := tarball.Write(ctx, &out, c, source(ws), "in", lim)
		if err != nil || rep.Files != 4 || rep.Links != 1 || rep.Dirs != 6 || len(rep.Refused) != 0 {
			t.Fatalf("%s: Write: %+v, %v", c, rep, err)
		}
		again := "out-" + string(c)
		rep, err = tarball.Extract(ctx, &out, tarball.Auto, dest(ws), again, lim)
		if err != nil || rep.Files != 4 || rep.Links != 1 || len(rep.Refused) != 0 {
			t.Fatalf("%s: extracting what Write wrote: %+v, %v", c, rep, err)
		}
		if got := readHost(t, filepath.Join(root, again, "repo/node_modules/.bin/run")); got != "#!/bin/sh\necho hi\n" {
			t.Errorf("%s: round trip through the link: %q", c, got)
		}
		if fi, err := os.Stat(filepath.Join(root, again, "repo/bin/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: round trip lost the mode: %v", c, err)
		}
	}
}

// TestHostileEntriesAreRefusedOneByOne: every way out is refused, by
// name and reason, the rest lands, and nothing appears outside the
// destination.
func TestHostileEntriesAreRefusedOneByOne(t *testing.T) {
	ws, state := workspace(t)
	ctx := context.Background()
	before := snapshot(t, state, ws.Root())
	hostile := tarOf(t,
		entry{name: "../x", typ: tar.TypeReg, body: "x"},
		entry{name: "/abs", typ: tar.TypeReg, body: "x"},
		entry{name: "a/../../y", typ: tar.TypeReg, body: "x"},
		entry{name: "out", typ: tar.TypeSymlink, link: "../../.."},
		entry{name: "passwd", typ: tar.TypeSymlink, link: "/etc/passwd"},
		entry{name: "sub/up", typ: tar.TypeSymlink, link: ".."},
		entry{name: "sub/up2", typ: tar.TypeSymlink, link: "up/../.."},
		entry{name: "sub/up/escape", typ: tar.TypeReg, body: "x"},
		entry{name: "hard", typ: tar.TypeLink, link: "ok"},
		entry{name: "dev", typ: tar.TypeChar},
		entry{name: "fifo", typ: tar.TypeFifo},
		entry{name: "ok", typ: tar.TypeReg, body: "fine"},
	)
	rep, err := tarball.Extract(ctx, bytes.NewReader(hostile), tarball.None, dest(ws), "dst", lim)
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{}
	for _, r := range rep.Refused {
		refused[r.Name] = r.Reason
	}
	for _, name := range []string{"../x", "/abs", "a/../../y", "out", "passwd", "sub/up2", "sub/up/escape", "hard", "dev", "fifo"} {
		if refused[name] == "" {
			t.Errorf("%s was not refused (report %+v)", name, rep)
		}
	}
	if len(refused) != 10 || rep.Files != 1 || rep.Links != 1 {
		t.Errorf("report %+v", rep)
	}
	if got := readHost(t, filepath.Join(ws.Root(), "dst/ok")); got != "fine" {
		t.Errorf("the good entry: %q", got)
	}
	after := snapshot(t, state, ws.Root())
	if before != after {
		t.Errorf("something landed outside the workspace:\nbefore %s\nafter  %s", before, after)
	}
	var outside []string
	_ = filepath.WalkDir(ws.Root(), func(p string, d fs.DirEntry, err error) error {
		if rel, _ := filepath.Rel(ws.Root(), p); rel != "." && rel != "dst" && !strings.HasPrefix(rel, "dst/") {
			outside = append(outside, rel)
		}
		return nil
	})
	if len(outside) > 0 {
		t.Errorf("landed outside dst: %v", outside)
	}
}

// snapshot lists the state directory's entries outside the workspace.
func snapshot(t *testing.T, state, root string) string {
	t.Helper()
	var names []string
	_ = filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if p == root || strings.HasPrefix(p, root+"/") || strings.Contains(p, "/cgroup") {
			return nil
		}
		names = append(names, strings.TrimPrefix(p, state))
		return nil
	})
	return strings.Join(names, " ")
}

// TestLimitsEndTheExtraction: too many entries or bytes is ErrTooLarge.
func TestLimitsEndTheExtraction(t *testing.T) {
	ws, _ := workspace(t)
	ctx := context.Background()
	three := tarOf(t, entry{name: "a", typ: tar.TypeReg, body: "1234"}, entry{name: "b", typ: tar.TypeReg, body: "1234"}, entry{name: "c", typ: tar.TypeReg, body: "1234"})
	rep, err := tarball.Extract(ctx, bytes.NewReader(three), tarball.None, dest(ws), "e", tarball.Limits{MaxEntries: 2, MaxBytes: 100})
	if !errors.Is(err, opsapi.ErrTooLarge) || rep.Files != 2 {
		t.Errorf("3 entries, 2 allowed: %+v, %v", rep, err)
	}
	rep, err = tarball.Extract(ctx, bytes.NewReader(three), tarball.None, dest(ws), "b", tarball.Limits{MaxEntries: 10, MaxBytes: 10})
	if !errors.Is(err, opsapi.ErrTooLarge) || rep.Files != 2 {
		t.Errorf("12 bytes, 10 allowed: %+v, %v", rep, err)
	}
	var out bytes.Buffer
	if _, err := tarball.Write(ctx, &out, tarball.None, source(ws), "e", tarball.Limits{MaxEntries: 1, MaxBytes: 100}); !errors.Is(err, opsapi.ErrTooLarge) {
		t.Errorf("writing 2 entries, 1 allowed: %v", err)
	}
	if _, err := tarball.Extract(ctx, strings.NewReader("not a tar at all, just words"), tarball.Auto, dest(ws), "bad", lim); !errors.Is(err, opsapi.ErrInvalid) {
		t.Errorf("garbage: %v, want ErrInvalid", err)
	}
}

// TestCompressionIsRecognised: gzip and zstd by their magic numbers.
func TestCompressionIsRecognised(t *testing.T) {
	ws, _ := workspace(t)
	plain := tarOf(t, entry{name: "f", typ: tar.TypeReg, body: "z"})
	var gz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	zw, _ := zstd.NewWriter(&zs)
	for _, w := range []io.WriteCloser{gw, zw} {
		if _, err := w.Write(plain); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string][]byte{"gz": gz.Bytes(), "zst": zs.Bytes()} {
		rep, err := tarball.Extract(context.Background(), bytes.NewReader(b), tarball.Auto, dest(ws), name, lim)
		if err != nil || rep.Files != 1 {
			t.Errorf("%s: %+v, %v", name, rep, err)
		}
	}
}

// TestManyFilesLandAsIfOneAfterAnother: files written a few at a time
// still land as a sequential extraction would: a later entry of the same
// name wins, a file under a name written just before waits for it, a file
// larger than the buffers streams, and all of it comes back out whole.
func TestManyFilesLandAsIfOneAfterAnother(t *testing.T) {
	ws, _ := workspace(t)
	ctx := context.Background()
	big := strings.Repeat("b", 4<<20+1)
	entries := []entry{
		{name: "same", typ: tar.TypeReg, body: "first"},
		{name: "same", typ: tar.TypeReg, body: "second"},
		{name: "big.bin", typ: tar.TypeReg, body: big},
		{name: "x", typ: tar.TypeReg, body: "a file first"},
		{name: "x/under", typ: tar.TypeReg, body: "refused: x is a file"},
	}
	for d := range 3 {
		for f := range 40 {
			entries = append(entries, entry{name: fmt.Sprintf("d%d/sub/f%02d", d, f), typ: tar.TypeReg, body: fmt.Sprintf("%d-%d", d, f)})
		}
	}
	rep, err := tarball.Extract(ctx, bytes.NewReader(tarOf(t, entries...)), tarball.None, dest(ws), "m", lim)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 124 || len(rep.Refused) != 1 || rep.Refused[0].Name != "x/under" {
		t.Fatalf("report %+v", rep)
	}
	if got := readHost(t, filepath.Join(ws.Root(), "m/same")); got != "second" {
		t.Errorf("the later entry of a name: %q", got)
	}
	var out bytes.Buffer
	rep, err = tarball.Write(ctx, &out, tarball.None, source(ws), "m", lim)
	if err != nil || rep.Files != 123 || rep.Bytes != int64(len(big))+int64(len("second")+len("a file first"))+3*10*3+3*30*4 {
		t.Fatalf("Write: %+v, %v", rep, err)
	}
	tr := tar.NewReader(&out)
	seen := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		seen[hdr.Name] = string(b)
	}
	if seen["big.bin"] != big || seen["d2/sub/f39"] != "2-39" || seen["same"] != "second" {
		t.Errorf("round trip: big %d bytes, d2/sub/f39 %q, same %q", len(seen["big.bin"]), seen["d2/sub/f39"], seen["same"])
	}
}

// mkdirCounter counts the Mkdir calls that reach the workspace, by path.
type mkdirCounter struct {
	*local.Workspace
	mu    sync.Mutex
	calls map[string]int
}

func (m *mkdirCounter) Mkdir(ctx context.Context, p string) error {
	m.mu.Lock()
	m.calls[p]++
	m.mu.Unlock()
	return m.Workspace.Mkdir(ctx, p)
}

// TestParentsAreMadeOncePerDirectory: a directory is asked for once,
// listed or not, however many files land in it; each ask is a round trip
// on a remote workspace.
func TestParentsAreMadeOncePerDirectory(t *testing.T) {
	ws, _ := workspace(t)
	m := &mkdirCounter{Workspace: ws, calls: map[string]int{}}
	entries := []entry{{name: "listed/", typ: tar.TypeDir, mode: 0o755}}
	for f := range 20 {
		entries = append(entries,
			entry{name: fmt.Sprintf("listed/f%02d", f), typ: tar.TypeReg, body: "l"},
			entry{name: fmt.Sprintf("a/b/f%02d", f), typ: tar.TypeReg, body: "b"})
	}
	rep, err := tarball.Extract(context.Background(), bytes.NewReader(tarOf(t, entries...)), tarball.None,
		tarball.Dest{Files: m, Tree: ws}, "m", lim)
	if err != nil || rep.Files != 40 || len(rep.Refused) != 0 {
		t.Fatalf("Extract: %+v, %v", rep, err)
	}
	want := map[string]int{"m": 1, "m/listed": 1, "m/a/b": 1}
	if fmt.Sprint(m.calls) != fmt.Sprint(want) {
		t.Errorf("Mkdir calls %v, want %v", m.calls, want)
	}
	if got := readHost(t, filepath.Join(ws.Root(), "m/a/b/f19")); got != "b" {
		t.Errorf("m/a/b/f19 holds %q", got)
	}
}
