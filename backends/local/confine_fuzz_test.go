package local_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

const canaryText = "CANARY-must-never-be-read-or-changed\n"

// FuzzConfine throws arbitrary paths (.., absolute, links out and in,
// /proc magic links, NULs) at every path-taking operation of one
// workspace. Invariants: no operation reads the canary beside the root,
// changes it, or creates anything beside it; every path an operation
// reports or works on resolves inside the root.
func FuzzConfine(f *testing.F) {
	for _, s := range []string{
		"", ".", "..", "../canary.txt", "/etc/passwd", "abs", "rel", "up/canary.txt", "rootlink/etc/passwd",
		"procroot/etc/hostname", "/proc/self/root/etc/passwd", "/proc/self/cwd/../canary.txt", "loop/x",
		"inlink/f", "absin/f", "sub/../../canary.txt", "a\x00b", "//", "sub/./../sub/f", "abs/../x",
		"uplink/workspaces/w/sub/f", "chain", "new/dir/x",
	} {
		for op := range uint8(9) {
			f.Add(s, op)
		}
	}
	ws, canary, canaryDir := fuzzWorkspace(f)
	_, rgErr := exec.LookPath("rg")
	ctx := context.Background()
	before := listing(f, canaryDir)

	f.Fuzz(func(t *testing.T, p string, op uint8) {
		inside := func(what, got string) {
			if !opsapi.Within(ws.Root(), got) {
				t.Fatalf("%s(%q) reached %q, outside the root", what, p, got)
			}
		}
		// realInside checks that p, when it resolves at all, resolves
		// inside the root.
		realInside := func(what string) {
			if rp, err := ws.RealPath(ctx, p); err == nil {
				inside(what, rp)
			}
		}
		switch op % 9 {
		case 0:
			if fi, err := ws.Stat(ctx, p); err == nil && fi.Type != opsapi.TypeSymlink {
				realInside("Stat")
			}
		case 1:
			if _, err := ws.ReadDir(ctx, p); err == nil {
				realInside("ReadDir")
			}
		case 2:
			if rc, err := ws.Open(ctx, p); err == nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				if bytes.Contains(b, []byte("CANARY")) {
					t.Fatalf("Open(%q) read the canary", p)
				}
				realInside("Open")
			}
		case 3:
			if err := ws.Access(ctx, p, opsapi.AccessRead|opsapi.AccessWrite); err == nil {
				realInside("Access")
			}
		case 4:
			if rp, err := ws.RealPath(ctx, p); err == nil {
				inside("RealPath", rp)
			}
		case 5:
			if err := ws.WriteFile(ctx, p, strings.NewReader("FUZZ\n")); err == nil {
				realInside("WriteFile")
			}
		case 6:
			if err := ws.Mkdir(ctx, p); err == nil {
				realInside("Mkdir")
			}
		case 7:
			if res, err := ws.Glob(ctx, opsapi.GlobRequest{Pattern: "*canary*", Dir: p, Limit: 50}); err == nil {
				// Matches are never followed links, so the directory
				// holding each must be inside.
				for _, m := range res.Paths {
					rp, err := ws.RealPath(ctx, opsapi.Resolve(opsapi.Resolve(ws.Root(), p), path.Dir(strings.TrimSuffix(m, "/"))))
					if err != nil {
						t.Fatalf("Glob(%q) found %q, whose directory does not resolve: %v", p, m, err)
					}
					inside("Glob", rp)
				}
			}
			if rgErr == nil {
				if res, err := ws.Search(ctx, opsapi.SearchRequest{Pattern: "CANARY", Path: p}); err == nil && len(res.Lines) > 0 {
					t.Fatalf("Search(%q) found %+v", p, res.Lines)
				}
			}
		case 8:
			var out bytes.Buffer
			res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "pwd -P", Cwd: p, Output: &out, Timeout: 10 * time.Second})
			if err == nil && res.ExitCode == 0 {
				inside("Exec cwd", strings.TrimSpace(out.String()))
			}
		}
		if b, err := os.ReadFile(canary); err != nil || string(b) != canaryText {
			t.Fatalf("after op %d on %q the canary is %q, %v", op%9, p, b, err)
		}
		if after := listing(t, canaryDir); after != before {
			t.Fatalf("after op %d on %q the directory beside the root changed:\n%s\nwas\n%s", op%9, p, after, before)
		}
	})
}

// fuzzWorkspace builds the workspace with links in and out and the canary
// beside its root.
func fuzzWorkspace(f *testing.F) (*local.Workspace, string, string) {
	testutil.RequireCommand(f, "bash")
	b, err := local.New(local.Config{StateDir: f.TempDir(), Exec: execconf.Exec{KillGrace: 200 * time.Millisecond}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	w, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: "w"})
	if err != nil {
		f.Fatal(err)
	}
	ws := w.(*local.Workspace)
	f.Cleanup(func() { _ = ws.Destroy(context.Background()) })
	canaryDir := filepath.Dir(ws.Root())
	canary := filepath.Join(canaryDir, "canary.txt")
	if err := os.WriteFile(canary, []byte(canaryText), 0o644); err != nil {
		f.Fatal(err)
	}
	var out bytes.Buffer
	res, err := ws.Exec(context.Background(), opsapi.ExecRequest{Output: &out, Command: `set -e
mkdir -p sub && echo inside > sub/f
ln -s ` + canary + ` abs
ln -s ../canary.txt rel
ln -s .. up
ln -s ../.. uplink
ln -s / rootlink
ln -s /proc/self/root procroot
ln -s loop loop
ln -s sub inlink
ln -s "$PWD/sub" absin
ln -s inlink chain`})
	if err != nil || res.ExitCode != 0 {
		f.Fatalf("setup: %v %+v %s", err, res, out.String())
	}
	return ws, canary, canaryDir
}

// listing names the entries of dir with their sizes and times.
func listing(t testing.TB, dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if fi.IsDir() {
			b.WriteString(e.Name() + "/\n") // the root itself changes inside
			continue
		}
		b.WriteString(e.Name() + " " + fi.ModTime().String() + "\n")
	}
	return b.String()
}
