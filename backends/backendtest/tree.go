package backendtest

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// tree covers TreeOperations: Symlink, Readlink and Chmod.
func (s *suite) tree(t *testing.T) {
	s.treeLinks(t)
	s.treeChmod(t)
}

// treeLinks holds the cases of Symlink and Readlink.
func (s *suite) treeLinks(t *testing.T) {
	t.Run("Symlink_then_Readlink_returns_the_target_as_given", func(t *testing.T) {
		ws, tr := s.treeWorkspace(t)
		ctx := ctxOf(t)
		put(t, ws, "d/target.txt", "linked")
		abs := path.Join(ws.Root(), "d/target.txt")
		for link, target := range map[string]string{
			"d/rel":     "target.txt",
			"d/up":      "../d/./target.txt",
			"d/abs":     abs,
			"dangling":  "nowhere/at/all",
			"d/outside": "/etc/hostname",
		} {
			must(t, tr.Symlink(ctx, target, link))
			got, err := tr.Readlink(ctx, link)
			must(t, err)
			eq(t, "Readlink("+link+")", got, target)
		}
		got, err := tr.Readlink(ctx, path.Join(ws.Root(), "d/rel"))
		must(t, err)
		eq(t, "Readlink by absolute path", got, "target.txt")
		for _, link := range []string{"d/rel", "d/up", "d/abs"} {
			eq(t, "content through "+link, get(t, ws, link), "linked")
		}
		fi, err := ws.Stat(ctx, "d/rel")
		must(t, err)
		eq(t, "Stat(link).Symlink", fi.Symlink, true)
		eq(t, "Stat(link).Type", fi.Type, opsapi.TypeFile)
	})
	t.Run("Symlink_belongs_to_the_workspace_user", func(t *testing.T) {
		ws, tr := s.treeWorkspace(t)
		must(t, tr.Symlink(ctxOf(t), "target", "link"))
		out := sh(t, ws, `echo "$(stat -c %u link) $(id -u)"`)
		owner, user, _ := strings.Cut(strings.TrimSpace(out), " ")
		eq(t, "owner of the link (uid)", owner, user)
	})
	t.Run("Symlink_over_an_existing_path_is_ErrExist", func(t *testing.T) {
		ws, tr := s.treeWorkspace(t)
		ctx := ctxOf(t)
		put(t, ws, "f", "keep")
		must(t, ws.Mkdir(ctx, "dir"))
		must(t, tr.Symlink(ctx, "f", "link"))
		for _, p := range []string{"f", "dir", "link", ".", ws.Root()} {
			wantKind(t, tr.Symlink(ctx, "other", p), opsapi.ErrExist)
		}
		eq(t, "content", get(t, ws, "f"), "keep")
		got, err := tr.Readlink(ctx, "link")
		must(t, err)
		eq(t, "link target", got, "f")
	})
	t.Run("Symlink_with_a_missing_parent_is_ErrNotExist", func(t *testing.T) {
		ws, tr := s.treeWorkspace(t)
		wantKind(t, tr.Symlink(ctxOf(t), "target", "missing/link"), opsapi.ErrNotExist)
		if n := names(t, ws, "."); len(n) != 0 {
			t.Fatalf("workspace holds %v after a failed Symlink", n)
		}
	})
	t.Run("Readlink_of_a_file_is_ErrInvalid_of_a_missing_path_ErrNotExist", func(t *testing.T) {
		ws, tr := s.treeWorkspace(t)
		ctx := ctxOf(t)
		put(t, ws, "f", "x")
		must(t, ws.Mkdir(ctx, "dir"))
		_, err := tr.Readlink(ctx, "f")
		wantKind(t, err, opsapi.ErrInvalid)
		_, err = tr.Readlink(ctx, "dir")
		wantKind(t, err, opsapi.ErrInvalid)
		_, err = tr.Readlink(ctx, "missing")
		wantKind(t, err, opsapi.ErrNotExist)
		_, err = tr.Readlink(ctx, "missing/link")
		wantKind(t, err, opsapi.ErrNotExist)
	})
}

// treeChmod holds the cases of Chmod.
func (s *suite) treeChmod(t *testing.T) {
	t.Run("Chmod_sets_the_permission_bits", func(t *testing.T) {
		ws, tr := s.treeWorkspace(t)
		ctx := ctxOf(t)
		put(t, ws, "f", "x")
		must(t, ws.Mkdir(ctx, "dir"))
		for _, tc := range []struct {
			p    string
			mode fs.FileMode
		}{
			{"f", 0o755}, {"f", 0o600}, {"dir", 0o700}, {"dir", 0o755},
			{path.Join(ws.Root(), "f"), 0o640},
		} {
			must(t, tr.Chmod(ctx, tc.p, tc.mode))
			fi, err := ws.Stat(ctx, tc.p)
			must(t, err)
			eq(t, fmt.Sprintf("mode of %s after Chmod %#o", tc.p, tc.mode), fi.Mode, tc.mode)
		}
		eq(t, "content", get(t, ws, "f"), "x")
	})
	t.Run("Chmod_follows_a_link", func(t *testing.T) {
		ws, tr := s.treeWorkspace(t)
		ctx := ctxOf(t)
		put(t, ws, "f", "x")
		must(t, tr.Chmod(ctx, "f", 0o644))
		must(t, tr.Symlink(ctx, "f", "link"))
		must(t, tr.Chmod(ctx, "link", 0o600))
		fi, err := ws.Stat(ctx, "f")
		must(t, err)
		eq(t, "mode of the link's target", fi.Mode, fs.FileMode(0o600))
		got, err := tr.Readlink(ctx, "link")
		must(t, err)
		eq(t, "link target", got, "f")
	})
	t.Run("Chmod_missing_is_ErrNotExist", func(t *testing.T) {
		_, tr := s.treeWorkspace(t)
		ctx := ctxOf(t)
		wantKind(t, tr.Chmod(ctx, "missing", 0o644), opsapi.ErrNotExist)
		must(t, tr.Symlink(ctx, "nowhere", "dangling"))
		wantKind(t, tr.Chmod(ctx, "dangling", 0o644), opsapi.ErrNotExist)
	})
}

// treeWorkspace marks t parallel and returns a fresh full workspace with
// its TreeOperations, found as callers find them (opsapi.As); it skips
// when the workspace lacks them.
func (s *suite) treeWorkspace(t *testing.T) (opsapi.Operations, opsapi.TreeOperations) {
	t.Helper()
	ws := s.parallel(t)
	tr, ok := opsapi.As[opsapi.TreeOperations](ws)
	if !ok {
		t.Skipf("workspace %T lacks opsapi.TreeOperations", ws)
	}
	return ws, tr
}
