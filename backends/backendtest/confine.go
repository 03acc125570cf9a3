package backendtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
)

// canary is a file on the test host beside a confined workspace's root. No
// operation may read or change it, and nothing may appear beside it.
type canary struct {
	abs     string // host path of the canary file
	name    string // its base name; "../"+name reaches it from the root
	content string
	escape  string // a name escape attempts try to create beside the root
	dir     string // the host directory holding the root and the canary
}

// confined returns a fresh confined workspace and its canary, or skips when
// the backend is not confined (a container or account is the boundary).
func (s *suite) confined(t *testing.T) (opsapi.Operations, canary) {
	t.Helper()
	if !s.o.Confined {
		t.Skip("backend is not confined: the container or account is the boundary")
	}
	ws := s.parallel(t)
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	c := canary{
		dir:     filepath.Dir(filepath.FromSlash(ws.Root())),
		name:    "backendtest-canary-" + hex.EncodeToString(tok),
		content: "CANARY-" + hex.EncodeToString(tok) + "\n",
		escape:  "backendtest-escape-" + hex.EncodeToString(tok),
	}
	c.abs = filepath.Join(c.dir, c.name)
	must(t, os.WriteFile(c.abs, []byte(c.content), 0o644))
	t.Cleanup(func() {
		// Every escape attempt names a path after this canary's token, so
		// this stays true when other workspaces share the directory.
		if got := hostNames(t, c.dir, hex.EncodeToString(tok)); got != c.name {
			t.Errorf("entries beside the root after the case: %s, want only %s", got, c.name)
		}
		got, err := os.ReadFile(c.abs)
		if err != nil || string(got) != c.content {
			t.Errorf("canary %s changed: %q, %v", c.abs, got, err)
		}
		if _, err := os.Lstat(filepath.Join(c.dir, c.escape)); err == nil {
			t.Errorf("%s was created outside the root", c.escape)
		}
		os.Remove(c.abs)
		os.RemoveAll(filepath.Join(c.dir, c.escape))
	})
	// Links out of the root: to the canary (absolute and relative) and to
	// the directory holding it.
	sh(t, ws, "ln -s "+shq(c.abs)+" abslink && ln -s "+shq("../"+c.name)+" rellink && ln -s .. up && mkdir -p a")
	return ws, c
}

// outside are paths that leave the root around canary c, by .., absolute
// path, symbolic link and /proc magic link.
func outside(c canary) []string {
	return []string{
		"../" + c.name, "a/../../" + c.name, "./a/../../" + c.name, c.abs, "/etc/passwd",
		"abslink", "rellink", "up/" + c.name,
		"/proc/self/root" + c.abs, "/proc/self/cwd/" + c.name, "/proc/self/root/etc/passwd",
	}
}

// confine covers path confinement: every operation refuses paths that
// leave the root, by .., absolute path, symbolic link or /proc magic link.
func (s *suite) confine(t *testing.T) {
	s.confineFiles(t)
	s.confineMetadata(t)
	s.confineSearchExec(t)
	s.confineRace(t)
	s.confineTools(t)
}

// confineFiles holds the cases of the file operations that read and write.
func (s *suite) confineFiles(t *testing.T) {
	t.Run("Open_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range outside(c) {
			rc, err := ws.Open(ctxOf(t), p)
			if err == nil {
				b, _ := readAllClose(rc)
				t.Errorf("Open(%q) succeeded and read %q", p, b)
				continue
			}
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Open(%q) = %v, want ErrPermission", p, err)
			}
		}
	})
	t.Run("Open_through_a_link_to_proc_self_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		sh(t, ws, "ln -s /proc/self/root pr && ln -s /proc/self/cwd pc")
		for _, p := range []string{"pr" + c.abs, "pr/etc/passwd", "pc/" + c.name} {
			_, err := ws.Open(ctxOf(t), p)
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Open(%q) = %v, want ErrPermission", p, err)
			}
		}
	})
	t.Run("Access_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range outside(c) {
			if err := ws.Access(ctxOf(t), p, opsapi.AccessRead); !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Access(%q) = %v, want ErrPermission", p, err)
			}
		}
	})
	t.Run("WriteFile_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range outside(c) {
			if strings.HasPrefix(p, "/etc") || strings.HasPrefix(p, "/proc/self/root/etc") || strings.HasPrefix(p, "/proc/self/cwd") {
				continue // never aim a write at the host's /etc or the test's own directory
			}
			err := ws.WriteFile(ctxOf(t), p, strings.NewReader("OVERWRITTEN"))
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("WriteFile(%q) = %v, want ErrPermission", p, err)
			}
		}
		for _, p := range []string{"../" + c.escape, "up/" + c.escape, filepath.ToSlash(filepath.Join(c.dir, c.escape))} {
			if err := ws.WriteFile(ctxOf(t), p, strings.NewReader("x")); !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("WriteFile(%q) = %v, want ErrPermission", p, err)
			}
		}
	})
	t.Run("WriteFile_through_a_link_out_leaves_the_link_and_target", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range []string{"abslink", "rellink"} {
			_ = ws.WriteFile(ctxOf(t), p, strings.NewReader("OVERWRITTEN"))
		}
		eq(t, "links", sh(t, ws, "test -L abslink && test -L rellink && echo links"), "links\n")
		got, err := os.ReadFile(c.abs)
		must(t, err)
		eq(t, "canary", string(got), c.content)
	})
	t.Run("WriteFile_and_Mkdir_through_a_dangling_link_out_create_nothing_outside", func(t *testing.T) {
		// Following a dangling link would create its target beside the root.
		ws, c := s.confined(t)
		sh(t, ws, "ln -s "+shq("../"+c.escape)+" dangle && ln -s "+shq(filepath.ToSlash(filepath.Join(c.dir, c.escape)))+" adangle")
		for _, p := range []string{"dangle", "adangle"} {
			if err := ws.WriteFile(ctxOf(t), p, strings.NewReader("x")); err == nil {
				t.Errorf("WriteFile(%q) through a dangling link out succeeded", p)
			}
			if err := ws.Mkdir(ctxOf(t), p+"/sub"); err == nil {
				t.Errorf("Mkdir(%q) through a dangling link out succeeded", p+"/sub")
			}
			if err := ws.Mkdir(ctxOf(t), p); err == nil {
				if _, err := os.Lstat(filepath.Join(c.dir, c.escape)); err == nil {
					t.Errorf("Mkdir(%q) created the link's target outside", p)
				}
			}
		}
	})
}

// confineMetadata holds the cases of Mkdir and the operations that describe paths.
func (s *suite) confineMetadata(t *testing.T) {
	t.Run("Mkdir_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range []string{"../" + c.escape, "a/../../" + c.escape, "up/" + c.escape,
			filepath.ToSlash(filepath.Join(c.dir, c.escape)), "/proc/self/root" + filepath.ToSlash(filepath.Join(c.dir, c.escape))} {
			if err := ws.Mkdir(ctxOf(t), p); !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Mkdir(%q) = %v, want ErrPermission", p, err)
			}
		}
	})
	t.Run("Stat_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range []string{"../" + c.name, "a/../../" + c.name, c.abs, "/etc/passwd", "up/" + c.name,
			"/proc/self/root" + c.abs, ".."} {
			if _, err := ws.Stat(ctxOf(t), p); !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Stat(%q) = %v, want ErrPermission", p, err)
			}
		}
	})
	t.Run("Stat_of_a_link_out_does_not_describe_its_target", func(t *testing.T) {
		// Either refused, or described as a link that cannot be followed.
		ws, c := s.confined(t)
		for _, p := range []string{"abslink", "rellink"} {
			fi, err := ws.Stat(ctxOf(t), p)
			switch {
			case err != nil && !errors.Is(err, opsapi.ErrPermission):
				t.Errorf("Stat(%q) = %v, want ErrPermission or TypeSymlink", p, err)
			case err == nil && fi.Type != opsapi.TypeSymlink:
				t.Errorf("Stat(%q) = %+v, describes the target outside the root", p, fi)
			case err == nil && fi.Size == int64(len(c.content)):
				t.Errorf("Stat(%q) reveals the target's size", p)
			}
		}
	})
	t.Run("ReadDir_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range []string{"..", "a/../..", "up", "/etc", c.dir, "/proc/self/root", "/proc/self/cwd"} {
			infos, err := ws.ReadDir(ctxOf(t), p)
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("ReadDir(%q) = %d entries, %v; want ErrPermission", p, len(infos), err)
			}
		}
	})
	t.Run("ReadDir_shows_links_out_as_TypeSymlink", func(t *testing.T) {
		ws, c := s.confined(t)
		infos, err := ws.ReadDir(ctxOf(t), ".")
		must(t, err)
		seen := 0
		for _, fi := range infos {
			switch fi.Name {
			case "abslink", "rellink", "up":
				seen++
				eq(t, fi.Name+" type", fi.Type, opsapi.TypeSymlink)
				if fi.Size == int64(len(c.content)) {
					t.Errorf("%s reveals the target's size", fi.Name)
				}
			}
		}
		eq(t, "links listed", seen, 3)
	})
	t.Run("RealPath_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		rs := capability[opsapi.Resolver](t, ws)
		for _, p := range []string{"../" + c.name, c.abs, "abslink", "rellink", "up", "/proc/self/root"} {
			got, err := rs.RealPath(ctxOf(t), p)
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("RealPath(%q) = %q, %v; want ErrPermission", p, got, err)
			}
		}
	})
}

// confineSearchExec holds the cases of Search, Glob and Exec.
func (s *suite) confineSearchExec(t *testing.T) {
	t.Run("Search_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range []string{"..", "../" + c.name, c.abs, "/etc", "up", "abslink", "rellink", "/proc/self/root" + c.dir} {
			res, err := ws.Search(ctxOf(t), opsapi.SearchRequest{Pattern: "CANARY", Path: p})
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Search(path %q) = %v, %v; want ErrPermission", p, fmtLines(res.Lines), err)
			}
		}
	})
	t.Run("Search_of_the_root_does_not_follow_links_out", func(t *testing.T) {
		ws, c := s.confined(t)
		put(t, ws, "inside.txt", "no secret here\n")
		res, err := ws.Search(ctxOf(t), opsapi.SearchRequest{Pattern: strings.TrimSpace(c.content), Path: "."})
		must(t, err)
		eq(t, "lines", fmtLines(res.Lines), "")
	})
	t.Run("Glob_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, p := range []string{"..", "a/../..", c.dir, "/etc", "up", "/proc/self/cwd"} {
			res, err := ws.Glob(ctxOf(t), opsapi.GlobRequest{Pattern: "*canary*", Dir: p})
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Glob(dir %q) = %v, %v; want ErrPermission", p, res.Paths, err)
			}
		}
	})
	t.Run("Glob_pattern_with_dotdot_or_absolute_path_finds_nothing_outside", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, pat := range []string{"../" + c.name, "../*", "a/../../" + c.name, c.abs, "/**/" + c.name, "**/../" + c.name} {
			res, err := ws.Glob(ctxOf(t), opsapi.GlobRequest{Pattern: pat, Dir: "."})
			if err != nil {
				continue // refusing the pattern is fine
			}
			for _, p := range res.Paths {
				if strings.Contains(p, c.name) || strings.HasPrefix(p, "../") {
					t.Errorf("Glob(%q) = %v, reaches outside the root", pat, res.Paths)
				}
			}
		}
	})
	t.Run("Glob_of_the_root_does_not_descend_links_out", func(t *testing.T) {
		ws, c := s.confined(t)
		res, err := ws.Glob(ctxOf(t), opsapi.GlobRequest{Pattern: c.name, Dir: "."})
		must(t, err)
		eq(t, "paths", strings.Join(res.Paths, " "), "")
	})
	t.Run("Exec_Cwd_outside_the_root_is_ErrPermission", func(t *testing.T) {
		ws, c := s.confined(t)
		for _, cwd := range []string{"..", "a/../..", c.dir, "/etc", "/", "up", "/proc/self/cwd", "/proc/self/root",
			"/proc/self/fd/7"} {
			var out bytes.Buffer
			_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "pwd", Cwd: cwd, Output: &out})
			if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Exec(cwd %q) = %v (output %q); want ErrPermission", cwd, err, out.String())
			}
		}
	})
}

// confineRace swaps a link under the operations between their check and their use.
func (s *suite) confineRace(t *testing.T) {
	t.Run("Symlink_swapped_between_check_and_use_never_reaches_the_canary", func(t *testing.T) {
		// A command flips "race" between a file inside and the canary, and
		// "racedir" between a directory inside and the canary's directory,
		// while every operation hammers them for a second.
		ws, c := s.confined(t)
		put(t, ws, "inside.txt", "inside\n")
		put(t, ws, "in/"+c.name, "inside\n")
		ctx, cancel := context.WithCancel(ctxOf(t))
		defer cancel()
		var swapOut bytes.Buffer
		type outcome struct {
			res opsapi.ExecResult
			err error
		}
		swapped := make(chan outcome, 1)
		go func() {
			res, err := ws.Exec(ctx, opsapi.ExecRequest{
				Command: "while :; do ln -sfn inside.txt race; ln -sfn in racedir; " +
					"ln -sfn " + shq(c.abs) + " race; ln -sfn " + shq(c.dir) + " racedir; done",
				Timeout: 30 * time.Second, Output: &swapOut,
			})
			swapped <- outcome{res, err}
		}()
		if !eventually(10*time.Second, func() bool { _, err := ws.Stat(ctxOf(t), "racedir"); return err == nil }) {
			t.Fatal("the swapping command never started")
		}
		var inside, refused atomic.Int64
		check := func(what string, b []byte, err error) {
			switch {
			case err == nil && strings.Contains(string(b), "CANARY"):
				t.Errorf("%s reached the canary: %q", what, b)
			case err == nil:
				inside.Add(1)
			case errors.Is(err, opsapi.ErrPermission):
				refused.Add(1)
			case !errors.Is(err, opsapi.ErrNotExist): // ln's unlink-then-link gap
				t.Errorf("%s: %v", what, err)
			}
		}
		hammer := func(op func()) func() {
			return func() {
				for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
					op()
				}
			}
		}
		var wg sync.WaitGroup
		wg.Go(hammer(func() { b, err := readAll(ctx, ws, "race"); check("Open(race)", b, err) }))
		wg.Go(hammer(func() { b, err := readAll(ctx, ws, "racedir/"+c.name); check("Open(racedir/canary)", b, err) }))
		wg.Go(hammer(func() { _ = ws.WriteFile(ctx, "race", strings.NewReader("inside\n")) }))
		wg.Go(hammer(func() { _ = ws.WriteFile(ctx, "racedir/"+c.name, strings.NewReader("inside\n")) }))
		wg.Go(hammer(func() {
			fi, err := ws.Stat(ctx, "racedir/"+c.name)
			if err == nil && fi.Size == int64(len(c.content)) {
				t.Errorf("Stat(racedir/canary) described the canary: %+v", fi)
			}
		}))
		wg.Go(hammer(func() {
			// Any error is fine here (files come and go under ripgrep while
			// the writers rename temp files); finding the canary is not.
			res, _ := ws.Search(ctx, opsapi.SearchRequest{Pattern: "CANARY", Path: "racedir"})
			if len(res.Lines) > 0 {
				t.Errorf("Search(racedir) reached the canary: %s", fmtLines(res.Lines))
			}
		}))
		wg.Go(hammer(func() {
			var out bytes.Buffer
			_, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "cat " + shq(c.name), Cwd: "racedir", Output: &out})
			check("Exec(cwd racedir)", out.Bytes(), err)
		}))
		wg.Wait()
		cancel()
		select {
		case o := <-swapped:
			must(t, o.err)
			eq(t, "swapper canceled (not exited early)", o.res.Canceled, true)
		case <-time.After(30 * time.Second):
			t.Fatal("the swapping command did not stop after cancel")
		}
		t.Logf("%d operations reached the inside target, %d were refused; swapper said %q", inside.Load(), refused.Load(), swapOut.String())
		if inside.Load() == 0 || refused.Load() == 0 {
			t.Errorf("the race was not exercised: %d inside, %d refused", inside.Load(), refused.Load())
		}
		got, err := os.ReadFile(c.abs)
		must(t, err)
		eq(t, "canary", string(got), c.content)
	})
}

// confineTools holds the cases of the tools on top of the operations.
func (s *suite) confineTools(t *testing.T) {
	t.Run("tools_refuse_paths_outside_the_root", func(t *testing.T) {
		ws, c := s.confined(t)
		tb := tools.New(ws, tools.Options{})
		t.Cleanup(func() { _ = tb.Close() })
		for _, call := range []struct{ tool, args string }{
			{"read", `{"path": "../` + c.name + `"}`},
			{"read", `{"path": "abslink"}`},
			{"read", `{"path": "/proc/self/root` + c.abs + `"}`},
			{"write", `{"path": "../` + c.escape + `", "content": "x"}`},
			{"write", `{"path": "abslink", "content": "OVERWRITTEN"}`},
			{"edit", `{"path": "rellink", "edits": [{"oldText": "CANARY", "newText": "EDITED"}]}`},
			{"edit", `{"path": "` + c.abs + `", "edits": [{"oldText": "CANARY", "newText": "EDITED"}]}`},
			{"ls", `{"path": ".."}`},
			{"ls", `{"path": "up"}`},
			{"grep", `{"pattern": "CANARY", "path": ".."}`},
			{"grep", `{"pattern": "CANARY", "path": "abslink"}`},
			{"find", `{"pattern": "*canary*", "path": ".."}`},
			{"find", `{"pattern": "*canary*", "path": "up"}`},
		} {
			res := tb.Call(ctxOf(t), call.tool, []byte(call.args), nil)
			if !res.IsError {
				t.Errorf("%s %s succeeded: %q", call.tool, call.args, textOf(res))
			}
			if strings.Contains(textOf(res), "CANARY") {
				t.Errorf("%s %s revealed the canary: %q", call.tool, call.args, textOf(res))
			}
		}
	})
	t.Run("tools_bash_cwd_outside_the_root_is_an_error", func(t *testing.T) {
		ws, c := s.confined(t)
		tb := tools.New(ws, tools.Options{Cwd: c.dir})
		t.Cleanup(func() { _ = tb.Close() })
		res := tb.Call(ctxOf(t), "bash", []byte(`{"command": "touch `+c.escape+`"}`), nil)
		if !res.IsError {
			t.Errorf("bash with cwd outside the root succeeded: %q", textOf(res))
		}
	})
}

// hostNames lists the names in a host directory that contain token.
func hostNames(t *testing.T, dir, token string) string {
	entries, err := os.ReadDir(dir)
	must(t, err)
	var n []string
	for _, e := range entries {
		if strings.Contains(e.Name(), token) {
			n = append(n, e.Name())
		}
	}
	return strings.Join(n, " ")
}

func readAllClose(rc interface {
	Read([]byte) (int, error)
	Close() error
}) ([]byte, error) {
	defer rc.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(rc)
	return b.Bytes(), err
}
