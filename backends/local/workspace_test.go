package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// outside makes a canary file beside the workspace root and checks at
// cleanup that it is unchanged.
func outside(t *testing.T, ws *local.Workspace) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(ws.Root()), "canary")
	if err := os.WriteFile(p, []byte("CANARY\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(p); err != nil || string(b) != "CANARY\n" {
			t.Errorf("canary changed: %q %v", b, err)
		}
	})
	return p
}

func TestLinksOutAreRefused(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	canary := outside(t, ws)
	sh(t, ws, fmt.Sprintf("ln -s %s abs && ln -s ../canary rel && ln -s / rootlink && ln -s .. up && mkdir d && ln -s ../../canary d/deeprel", canary))
	ctx := t.Context()
	for _, p := range []string{"abs", "rel", "rootlink/etc/passwd", "up/canary", "d/deeprel", "../canary", canary, "d/../../canary"} {
		if _, err := ws.Open(ctx, p); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Open(%q): %v, want ErrPermission", p, err)
		}
		if err := ws.WriteFile(ctx, p, strings.NewReader("PWNED")); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("WriteFile(%q): %v, want ErrPermission", p, err)
		}
		if err := ws.Access(ctx, p, opsapi.AccessRead); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Access(%q): %v, want ErrPermission", p, err)
		}
		if _, err := ws.RealPath(ctx, p); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("RealPath(%q): %v, want ErrPermission", p, err)
		}
	}
	// A link out is described as a link that cannot be followed.
	for _, p := range []string{"abs", "rel", "rootlink", "up"} {
		fi, err := ws.Stat(ctx, p)
		if err != nil || fi.Type != opsapi.TypeSymlink || !fi.Symlink {
			t.Errorf("Stat(%q) = %+v, %v; want TypeSymlink", p, fi, err)
		}
	}
	for _, p := range []string{"rootlink/etc", "up/canary", "/etc/passwd", ".."} {
		if _, err := ws.Stat(ctx, p); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Stat(%q): %v, want ErrPermission", p, err)
		}
		if _, err := ws.ReadDir(ctx, p); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("ReadDir(%q): %v, want ErrPermission", p, err)
		}
	}
	if err := ws.Mkdir(ctx, "up/escape"); !errors.Is(err, opsapi.ErrPermission) {
		t.Errorf("Mkdir through a link out: %v, want ErrPermission", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws.Root()), "escape")); err == nil {
		t.Error("Mkdir created a directory outside the root")
	}
	// The links themselves survive the write attempts.
	if out := sh(t, ws, "test -L abs && test -L rel && echo ok"); out != "ok\n" {
		t.Error("a link was replaced")
	}
}

func TestProcMagicLinksAreRefused(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, "ln -s /proc/self/root procroot && ln -s /proc/self/cwd proccwd && ln -s ../../../../../../../../proc/self/root relproc")
	for _, p := range []string{
		"/proc/self/root/etc/passwd", "/proc/self/cwd", "/proc/1/root", "/proc/self/fd/0",
		"procroot/etc/passwd", "proccwd/x", "relproc/etc/passwd",
	} {
		if _, err := ws.Open(t.Context(), p); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Open(%q): %v, want ErrPermission", p, err)
		}
		if _, err := ws.Search(t.Context(), opsapi.SearchRequest{Pattern: "root", Path: p}); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Search(%q): %v, want ErrPermission", p, err)
		}
		if _, err := ws.Glob(t.Context(), opsapi.GlobRequest{Pattern: "*", Dir: p}); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Glob(%q): %v, want ErrPermission", p, err)
		}
	}
}

func TestLinksInsideAreFollowed(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	ctx := t.Context()
	sh(t, ws, "mkdir -p real/sub && echo hi > real/sub/f && ln -s real/sub rel && ln -s "+ws.Root()+"/real abs && ln -s rel chain && ln -s nowhere dangling && ln -s loop loop")
	for _, p := range []string{"rel/f", "abs/sub/f", "chain/f", ws.Root() + "/chain/f"} {
		b, err := readAll(ctx, ws, p)
		if err != nil || b != "hi\n" {
			t.Errorf("Open(%q) = %q, %v", p, b, err)
		}
		rp, err := ws.RealPath(ctx, p)
		if err != nil || rp != ws.Root()+"/real/sub/f" {
			t.Errorf("RealPath(%q) = %q, %v", p, rp, err)
		}
	}
	fi, err := ws.Stat(ctx, "abs")
	if err != nil || fi.Type != opsapi.TypeDir || !fi.Symlink || fi.Name != "abs" {
		t.Errorf("Stat(abs) = %+v, %v", fi, err)
	}
	for _, p := range []string{"dangling", "loop"} {
		fi, err := ws.Stat(ctx, p)
		if err != nil || fi.Type != opsapi.TypeSymlink {
			t.Errorf("Stat(%q) = %+v, %v; want TypeSymlink", p, fi, err)
		}
		if _, err := ws.RealPath(ctx, p); err == nil {
			t.Errorf("RealPath(%q) succeeded", p)
		}
	}
	if _, err := ws.RealPath(ctx, "dangling"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("RealPath(dangling): %v, want ErrNotExist", err)
	}
	// Writing through a dangling link inside creates its target.
	if err := ws.WriteFile(ctx, "dangling", strings.NewReader("made")); err != nil {
		t.Fatal(err)
	}
	if b, _ := readAll(ctx, ws, "nowhere"); b != "made" {
		t.Errorf("nowhere = %q", b)
	}
	entries, err := ws.ReadDir(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]opsapi.FileType{}
	for _, e := range entries {
		types[e.Name] = e.Type
	}
	want := map[string]opsapi.FileType{"real": opsapi.TypeDir, "rel": opsapi.TypeDir, "abs": opsapi.TypeDir,
		"chain": opsapi.TypeDir, "dangling": opsapi.TypeFile, "nowhere": opsapi.TypeFile, "loop": opsapi.TypeSymlink}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("ReadDir types %v, want %v", types, want)
	}
}

func readAll(ctx context.Context, ws *local.Workspace, p string) (string, error) {
	rc, err := ws.Open(ctx, p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// failAfter yields n bytes of 'x', then fails.
type failAfter struct{ n int }

func (r *failAfter) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("disk offline")
	}
	k := min(len(p), r.n)
	for i := range k {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

func TestWriteFileFailureLeavesTargetIntact(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	ctx := t.Context()
	if err := ws.WriteFile(ctx, "f", strings.NewReader("old content\n")); err != nil {
		t.Fatal(err)
	}
	sh(t, ws, "chmod 640 f")
	err := ws.WriteFile(ctx, "f", &failAfter{n: 100 << 10})
	if err == nil || !strings.Contains(err.Error(), "disk offline") {
		t.Fatalf("WriteFile with a failing reader: %v", err)
	}
	if b := readFile(t, ws, "f"); b != "old content\n" {
		t.Fatalf("target changed: %q", b[:min(len(b), 40)])
	}
	// No temporary file is left behind.
	if out := sh(t, ws, "ls -A"); out != "f\n" {
		t.Fatalf("directory holds %q", out)
	}
	// ctx ending mid-copy also leaves the target and no temporary.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := ws.WriteFile(cctx, "f", strings.NewReader("new")); !errors.Is(err, opsapi.ErrCanceled) {
		t.Fatalf("WriteFile with canceled ctx: %v", err)
	}
	if out := sh(t, ws, "ls -A; stat -c %a f"); out != "f\n640\n" {
		t.Fatalf("after cancel: %q", out)
	}
	// A successful replace keeps the mode.
	if err := ws.WriteFile(ctx, "f", strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, ws, "cat f; echo; stat -c %a f"); out != "new\n640\n" {
		t.Fatalf("after replace: %q", out)
	}
}

func TestWriteFileKeepsOwner(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, "echo a > f")
	// By the broker's user (root): a sandboxed command may not give a
	// file away.
	if err := os.Chown(filepath.Join(ws.Root(), "f"), 1234, 2345); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile(t.Context(), "f", strings.NewReader("b")); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, ws, "stat -c %u:%g f"); out != "1234:2345\n" {
		t.Fatalf("owner after replace: %q", out)
	}
}

func TestWriteFileKinds(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	ctx := t.Context()
	sh(t, ws, "mkdir d && touch file")
	for _, tc := range []struct {
		p    string
		kind error
	}{
		{"d", opsapi.ErrIsDir},
		{".", opsapi.ErrIsDir},
		{"missing/f", opsapi.ErrNotExist},
		{"file/f", opsapi.ErrNotDir},
		{"a\x00b", opsapi.ErrInvalid},
	} {
		if err := ws.WriteFile(ctx, tc.p, strings.NewReader("x")); !errors.Is(err, tc.kind) {
			t.Errorf("WriteFile(%q): %v, want %v", tc.p, err, tc.kind)
		}
	}
	long := strings.Repeat("n", 250)
	if err := ws.WriteFile(ctx, long, strings.NewReader("x")); err != nil {
		t.Errorf("WriteFile of a 250-byte name: %v", err)
	}
}

func TestOpenRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	testutil.RequireCommand(t, "mkfifo")
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, "mkfifo fifo")
	// Opening a fifo must neither hang nor read.
	if _, err := ws.Open(t.Context(), "fifo"); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("Open(fifo): %v, want ErrInvalid", err)
	}
	fi, err := ws.Stat(t.Context(), "fifo")
	if err != nil || fi.Type != opsapi.TypeOther {
		t.Fatalf("Stat(fifo) = %+v, %v", fi, err)
	}
}

func TestAccessMatchesTheWorkspaceUser(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, "echo x > rw && echo x > ro && chmod 444 ro && echo x > none && chmod 000 none")
	for _, f := range []string{"rw", "ro", "none"} {
		for _, m := range []struct {
			mode opsapi.AccessMode
			test string
		}{{opsapi.AccessRead, "-r"}, {opsapi.AccessWrite, "-w"}, {opsapi.AccessRead | opsapi.AccessWrite, "-r " + f + " -a -w"}} {
			_, res := run(t, ws, opsapi.ExecRequest{Command: "test " + m.test + " " + f})
			err := ws.Access(t.Context(), f, m.mode)
			if (res.ExitCode == 0) != (err == nil) || err != nil && !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Access(%s, %v) = %v but test %s exits %d", f, m.mode, err, m.test, res.ExitCode)
			}
		}
	}
	if err := ws.Access(t.Context(), "missing", opsapi.AccessRead); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("Access(missing): %v", err)
	}
}

func TestMkdir(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, local.Config{})
	ctx := t.Context()
	if err := ws.Mkdir(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if err := ws.Mkdir(ctx, "a/b"); err != nil {
		t.Fatalf("existing dir: %v", err)
	}
	sh(t, ws, "touch f && ln -s a/b lb")
	if err := ws.Mkdir(ctx, "f"); !errors.Is(err, opsapi.ErrExist) {
		t.Errorf("Mkdir over a file: %v, want ErrExist", err)
	}
	if err := ws.Mkdir(ctx, "f/x"); !errors.Is(err, opsapi.ErrNotDir) {
		t.Errorf("Mkdir under a file: %v, want ErrNotDir", err)
	}
	if err := ws.Mkdir(ctx, "lb/new"); err != nil {
		t.Errorf("Mkdir through an inside link: %v", err)
	}
	if fi, err := ws.Stat(ctx, "a/b/new"); err != nil || !fi.IsDir() {
		t.Errorf("a/b/new: %+v %v", fi, err)
	}
}

func TestBackendCreateListDestroy(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	b, err := local.New(local.Config{StateDir: state}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if b.Name() != "local" {
		t.Errorf("Name = %q", b.Name())
	}
	for _, id := range []string{"", ".", "..", "a/b", ".hidden", "-flag", "a b", strings.Repeat("x", 129), "x\x00"} {
		if _, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: id}); !errors.Is(err, opsapi.ErrInvalid) {
			t.Errorf("Create(%q): %v, want ErrInvalid", id, err)
		}
	}
	for _, opts := range []string{`{"image":"x"}`, `[1]`, `{`} {
		if _, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "o", Options: []byte(opts)}); !errors.Is(err, opsapi.ErrInvalid) {
			t.Errorf("Create with options %s: %v, want ErrInvalid", opts, err)
		}
	}
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "ws-1", Options: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(state, "workspaces", "ws-1"); ws.Root() != want {
		t.Errorf("Root = %q, want %q", ws.Root(), want)
	}
	if _, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "ws-1"}); !errors.Is(err, opsapi.ErrExist) {
		t.Errorf("second Create: %v, want ErrExist", err)
	}
	if err := ws.(*local.Workspace).WriteFile(ctx, "kept", strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}

	// A restarted broker finds the workspace again, data included.
	b2, err := local.New(local.Config{StateDir: state}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	found, err := b2.List(ctx)
	if err != nil || len(found) != 1 || found["ws-1"] == nil {
		t.Fatalf("List = %v, %v", found, err)
	}
	again := found["ws-1"].(*local.Workspace)
	if got := readFile(t, again, "kept"); got != "data" {
		t.Fatalf("kept = %q", got)
	}
	if err := again.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if found, _ := b2.List(ctx); len(found) != 0 {
		t.Fatalf("List after Destroy = %v", found)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "late"}); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Errorf("Create after Close: %v, want ErrUnavailable", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []local.Config{
		{},
		{StateDir: "relative"},
		{StateDir: t.TempDir(), Exec: execconf.Exec{Shell: "/nonexistent/bash"}},
	} {
		if _, err := local.New(cfg, testutil.Logger(t)); !errors.Is(err, opsapi.ErrInvalid) {
			t.Errorf("New(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
}
