package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

func TestGlobOverTheRoot(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, `mkdir -p pkg/gen out && echo '*.gen.go' > .gitignore && touch pkg/a.go pkg/a.gen.go pkg/gen/b.go &&
ln -s / out/rootlink && ln -s pkg pkglink && touch file`)
	ctx := t.Context()
	// A search in a sub-directory applies the root's .gitignore.
	res, err := ws.Glob(ctx, opsapi.GlobRequest{Pattern: "*.go", Dir: "pkg"})
	if err != nil || !slices.Equal(res.Paths, []string{"a.go", "gen/b.go"}) {
		t.Fatalf("Glob(pkg) = %q, %v", res.Paths, err)
	}
	// Links are reported, never descended (in or out).
	res, err = ws.Glob(ctx, opsapi.GlobRequest{Pattern: "*", Dir: "."})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "file", "out/", "out/rootlink", "pkg/", "pkg/a.go", "pkg/gen/", "pkg/gen/b.go", "pkglink"}
	if !slices.Equal(res.Paths, want) {
		t.Fatalf("Glob(.) = %q\nwant %q", res.Paths, want)
	}
	// A Dir that is a link inside the root is searched.
	if res, err := ws.Glob(ctx, opsapi.GlobRequest{Pattern: "a.go", Dir: "pkglink"}); err != nil || !slices.Equal(res.Paths, []string{"a.go"}) {
		t.Fatalf("Glob(pkglink) = %q, %v", res.Paths, err)
	}
	for _, tc := range []struct {
		dir, pattern string
		kind         error
	}{
		{"missing", "*", opsapi.ErrNotExist},
		{"file", "*", opsapi.ErrNotDir},
		{"out/rootlink", "*", opsapi.ErrPermission},
		{"..", "*", opsapi.ErrPermission},
		{".", "[", opsapi.ErrInvalid},
	} {
		if _, err := ws.Glob(ctx, opsapi.GlobRequest{Pattern: tc.pattern, Dir: tc.dir}); !errors.Is(err, tc.kind) {
			t.Errorf("Glob(%q, %q): %v, want %v", tc.dir, tc.pattern, err, tc.kind)
		}
	}
}

func TestListRemovesStaleTemporaries(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	b, err := local.New(local.Config{StateDir: state}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	ws := w.(*local.Workspace)
	t.Cleanup(func() { _ = ws.Destroy(context.Background()) })
	// What a crash mid-WriteFile leaves: the target and temporaries, one
	// of them written a moment before the crash.
	sh(t, ws, "mkdir d && echo old > d/f && echo partial > d/.f.tmp-0123456789abcdef && echo fresh > .g.tmp-fedcba9876543210 && echo mine > .h.tmp-notrandom")
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"d/.f.tmp-0123456789abcdef", ".h.tmp-notrandom"} {
		_ = os.Chtimes(filepath.Join(ws.Root(), p), old, old)
	}
	_ = b.Close()
	time.Sleep(10 * time.Millisecond) // the restart comes after the last write
	restarted, err := local.New(local.Config{StateDir: state}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.Close() })
	// A write of this run, in progress while the sweep runs.
	sh(t, ws, "echo live > .i.tmp-00112233aabbccdd")
	if _, err := restarted.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Every temporary from before the restart goes, however recent (one
	// broker holds a state directory: none can be a write in progress),
	// in the background (a start does not wait for every workspace's
	// walk); this run's and a user's file of a similar name stay.
	want := ".:\n.h.tmp-notrandom\n.i.tmp-00112233aabbccdd\nd\n\nd:\nf\n"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out := sh(t, ws, "ls -A . d")
		if out == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after List: %q", out)
		}
	}
}
