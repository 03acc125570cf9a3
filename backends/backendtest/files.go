package backendtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// files covers the file operations: Open, Access, WriteFile, Mkdir, Stat,
// ReadDir and RealPath.
func (s *suite) files(t *testing.T) {
	s.filesOpenAccess(t)
	s.filesWrite(t)
	s.filesWriteFailures(t)
	s.filesConcurrent(t)
	s.filesMkdirStat(t)
	s.filesReadDirRealPath(t)
}

// filesOpenAccess holds the cases of Open and Access.
func (s *suite) filesOpenAccess(t *testing.T) {
	t.Run("Open_reads_back_what_WriteFile_wrote", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a.txt", "hello\nworld\n")
		eq(t, "content", get(t, ws, "a.txt"), "hello\nworld\n")
	})
	t.Run("Open_relative_and_absolute_paths_name_the_same_file", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/a.txt", "same")
		eq(t, "absolute read", get(t, ws, path.Join(ws.Root(), "d/a.txt")), "same")
		must(t, ws.WriteFile(ctxOf(t), path.Join(ws.Root(), "d/b.txt"), strings.NewReader("abs")))
		eq(t, "relative read", get(t, ws, "d/b.txt"), "abs")
	})
	t.Run("Open_missing_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		_, err := ws.Open(ctxOf(t), "missing.txt")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Open_directory_is_ErrIsDir", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "dir"))
		rc, err := ws.Open(ctxOf(t), "dir")
		if err == nil {
			rc.Close()
		}
		wantKind(t, err, opsapi.ErrIsDir)
	})
	t.Run("Open_empty_file_reads_nothing", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "empty", "")
		eq(t, "content", get(t, ws, "empty"), "")
	})
	t.Run("Access_own_new_file_is_readable_and_writable", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "f", "x")
		must(t, ws.Access(ctxOf(t), "f", opsapi.AccessRead|opsapi.AccessWrite))
		must(t, ws.Access(ctxOf(t), ".", opsapi.AccessRead))
	})
	t.Run("Access_missing_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		wantKind(t, ws.Access(ctxOf(t), "missing", opsapi.AccessRead), opsapi.ErrNotExist)
		wantKind(t, ws.Access(ctxOf(t), "missing", opsapi.AccessWrite), opsapi.ErrNotExist)
	})
	t.Run("Access_agrees_with_test_-r_-w_of_the_workspace_user", func(t *testing.T) {
		// chmod 444/000 do not bind root, so the expected answer is what
		// the workspace's own user gets from test(1), not a fixed one.
		ws := s.parallel(t)
		put(t, ws, "ro", "x")
		put(t, ws, "none", "x")
		sh(t, ws, "chmod 444 ro && chmod 000 none")
		for _, c := range []struct {
			file string
			mode opsapi.AccessMode
			test string
		}{
			{"ro", opsapi.AccessRead, "-r"},
			{"ro", opsapi.AccessWrite, "-w"},
			{"none", opsapi.AccessRead, "-r"},
			{"none", opsapi.AccessWrite, "-w"},
		} {
			_, res := run(t, ws, "test "+c.test+" "+c.file)
			err := ws.Access(ctxOf(t), c.file, c.mode)
			if res.ExitCode == 0 {
				if err != nil {
					t.Errorf("Access(%s, %s) = %v, but test %s succeeds for the workspace user", c.file, c.test, err, c.test)
				}
			} else if !errors.Is(err, opsapi.ErrPermission) {
				t.Errorf("Access(%s, %s) = %v, want ErrPermission (test %s fails)", c.file, c.test, err, c.test)
			}
		}
	})
}

// filesWrite holds the cases of WriteFile that succeed.
func (s *suite) filesWrite(t *testing.T) {
	t.Run("WriteFile_creates_a_new_file_with_mode_at_most_0644", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "new.txt", "n")
		fi, err := ws.Stat(ctxOf(t), "new.txt")
		must(t, err)
		eq(t, "type", fi.Type, opsapi.TypeFile)
		if fi.Mode&^0o644 != 0 || fi.Mode&0o600 != 0o600 {
			t.Fatalf("mode = %v, want 0644 less a umask", fi.Mode)
		}
	})
	t.Run("WriteFile_replaces_existing_content_completely", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "f", strings.Repeat("long old content\n", 100))
		put(t, ws, "f", "short")
		eq(t, "content", get(t, ws, "f"), "short")
	})
	t.Run("WriteFile_empty_reader_makes_empty_file", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "f", "old")
		put(t, ws, "f", "")
		fi, err := ws.Stat(ctxOf(t), "f")
		must(t, err)
		eq(t, "size", fi.Size, 0)
	})
	t.Run("WriteFile_missing_parent_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		err := ws.WriteFile(ctxOf(t), "no/such/dir/f", strings.NewReader("x"))
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("WriteFile_onto_directory_is_ErrIsDir", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "dir"))
		err := ws.WriteFile(ctxOf(t), "dir", strings.NewReader("x"))
		wantKind(t, err, opsapi.ErrIsDir)
		fi, err := ws.Stat(ctxOf(t), "dir")
		must(t, err)
		eq(t, "type after failed write", fi.Type, opsapi.TypeDir)
	})
	t.Run("WriteFile_preserves_mode_on_replace", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "x.sh", "#!/bin/sh\necho one\n")
		sh(t, ws, "chmod 0751 x.sh")
		put(t, ws, "x.sh", "#!/bin/sh\necho two\n")
		fi, err := ws.Stat(ctxOf(t), "x.sh")
		must(t, err)
		eq(t, "mode", fi.Mode, fs.FileMode(0o751))
		eq(t, "output", sh(t, ws, "./x.sh"), "two\n")
	})
	t.Run("WriteFile_through_inside_symlink_updates_target_keeps_link", func(t *testing.T) {
		// pi's fs.writeFile follows links; the mutation queue keys on the
		// real path for the same reason.
		ws := s.parallel(t)
		put(t, ws, "target.txt", "old")
		sh(t, ws, "ln -s target.txt alias.txt")
		put(t, ws, "alias.txt", "new")
		eq(t, "target", get(t, ws, "target.txt"), "new")
		eq(t, "still a link", sh(t, ws, "test -L alias.txt && echo link"), "link\n")
	})
	t.Run("WriteFile_binary_and_invalid_UTF8_round_trip_sha256", func(t *testing.T) {
		ws := s.parallel(t)
		data := make([]byte, 0, 1<<20)
		for i := range 1 << 20 {
			data = append(data, byte(i*7+i>>8)) // every byte value, NULs, lone continuation bytes
		}
		data = append(data, 0xff, 0xfe, 0xc3, 0x28, 0x00, '\r', '\n', 0xe2, 0x82)
		sum := sha256.Sum256(data)
		must(t, ws.WriteFile(ctxOf(t), "bin", bytes.NewReader(data)))
		got, err := readAll(ctxOf(t), ws, "bin")
		must(t, err)
		eq(t, "sha256 via Open", sha256.Sum256(got), sum)
		out := sh(t, ws, "sha256sum bin")
		eq(t, "sha256sum in workspace", strings.Fields(out)[0], hex.EncodeToString(sum[:]))
	})
}

// filesWriteFailures holds the cases of WriteFile that fail or are canceled midway.
func (s *suite) filesWriteFailures(t *testing.T) {
	t.Run("WriteFile_failing_reader_leaves_old_content_and_no_temp_file", func(t *testing.T) {
		ws := s.parallel(t)
		old := "old content\x00\xff\n"
		put(t, ws, "d/f", old)
		boom := errors.New("reader broke")
		r := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("new"), 100_000)), failingReader{boom})
		err := ws.WriteFile(ctxOf(t), "d/f", r)
		if err == nil {
			t.Fatal("WriteFile with a failing reader returned nil")
		}
		eq(t, "content", get(t, ws, "d/f"), old)
		eq(t, "listing", fmt.Sprint(names(t, ws, "d")), "[f]")
	})
	t.Run("WriteFile_ctx_canceled_midway_leaves_old_content_and_no_temp_file", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/f", "old")
		ctx, cancel := context.WithCancel(ctxOf(t))
		r := &cancelingReader{n: 50 << 20, cancelAt: 1 << 20, cancel: cancel}
		err := ws.WriteFile(ctx, "d/f", r)
		if err == nil {
			t.Fatal("WriteFile returned nil after its ctx was canceled mid-way")
		}
		eq(t, "content", get(t, ws, "d/f"), "old")
		eq(t, "listing", fmt.Sprint(names(t, ws, "d")), "[f]")
	})
	t.Run("WriteFile_with_an_already_canceled_ctx_writes_nothing", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/f", "old")
		ctx, cancel := context.WithCancel(ctxOf(t))
		cancel()
		if err := ws.WriteFile(ctx, "d/f", strings.NewReader("new")); err == nil {
			t.Error("WriteFile with a canceled ctx returned nil")
		}
		if err := ws.WriteFile(ctx, "d/g", strings.NewReader("new")); err == nil {
			t.Error("WriteFile of a new file with a canceled ctx returned nil")
		}
		eq(t, "content", get(t, ws, "d/f"), "old")
		eq(t, "listing", fmt.Sprint(names(t, ws, "d")), "[f]")
	})
	t.Run("WriteFile_success_leaves_no_temp_file", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/f", "one")
		put(t, ws, "d/f", "two")
		put(t, ws, "d/g", "three")
		eq(t, "listing", fmt.Sprint(names(t, ws, "d")), "[f g]")
	})
}

// filesConcurrent holds the cases of readers and writers at the same time, and NUL in paths.
func (s *suite) filesConcurrent(t *testing.T) {
	t.Run("Open_reader_keeps_its_version_when_the_file_is_replaced", func(t *testing.T) {
		// Atomic replacement: a reader opened before WriteFile sees the old
		// content to the end, never a mix of both.
		ws := s.parallel(t)
		a := bytes.Repeat([]byte("A"), 8<<20)
		must(t, ws.WriteFile(ctxOf(t), "f", bytes.NewReader(a)))
		rc, err := ws.Open(ctxOf(t), "f")
		must(t, err)
		defer rc.Close()
		head := make([]byte, 1<<20)
		_, err = io.ReadFull(rc, head)
		must(t, err)
		must(t, ws.WriteFile(ctxOf(t), "f", bytes.NewReader(bytes.Repeat([]byte("B"), 8<<20))))
		rest, err := io.ReadAll(rc)
		must(t, err)
		got := append(head, rest...)
		if !bytes.Equal(got, a) {
			t.Fatalf("the open reader saw %d bytes, %d of them B", len(got), bytes.Count(got, []byte("B")))
		}
		eq(t, "new content", get(t, ws, "f") == strings.Repeat("B", 8<<20), true)
	})
	t.Run("WriteFile_50_parallel_distinct_files_all_land", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "d"))
		var wg sync.WaitGroup
		errs := make([]error, 50)
		for i := range 50 {
			wg.Go(func() {
				content := strings.Repeat(fmt.Sprintf("file %d\n", i), 1000+i)
				errs[i] = ws.WriteFile(ctxOf(t), fmt.Sprintf("d/f%02d", i), strings.NewReader(content))
			})
		}
		wg.Wait()
		must(t, errors.Join(errs...))
		for i := range 50 {
			want := strings.Repeat(fmt.Sprintf("file %d\n", i), 1000+i)
			if got := get(t, ws, fmt.Sprintf("d/f%02d", i)); got != want {
				t.Errorf("d/f%02d: %d bytes, want %d", i, len(got), len(want))
			}
		}
		eq(t, "entries", len(names(t, ws, "d")), 50)
	})
	t.Run("WriteFile_50_parallel_writes_of_one_file_leave_one_complete_version", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "d"))
		version := func(i int) string { return strings.Repeat(fmt.Sprintf("version %02d|", i), 20_000) }
		var wg sync.WaitGroup
		errs := make([]error, 50)
		for i := range 50 {
			wg.Go(func() { errs[i] = ws.WriteFile(ctxOf(t), "d/one", strings.NewReader(version(i))) })
		}
		wg.Wait()
		must(t, errors.Join(errs...))
		got := get(t, ws, "d/one")
		var i int
		if _, err := fmt.Sscanf(got, "version %02d|", &i); err != nil || got != version(i) {
			t.Fatalf("final content (%d bytes, starts %q) is not one complete version", len(got), got[:min(len(got), 20)])
		}
		eq(t, "listing", fmt.Sprint(names(t, ws, "d")), "[one]")
	})
	t.Run("NUL_in_a_path_is_ErrInvalid_for_every_op", func(t *testing.T) {
		// security-cases §17: a NUL must not truncate the path to "a".
		ws := s.parallel(t)
		put(t, ws, "a", "x")
		const p = "a\x00b"
		_, err := ws.Open(ctxOf(t), p)
		wantKind(t, err, opsapi.ErrInvalid)
		wantKind(t, ws.Access(ctxOf(t), p, opsapi.AccessRead), opsapi.ErrInvalid)
		wantKind(t, ws.WriteFile(ctxOf(t), p, strings.NewReader("y")), opsapi.ErrInvalid)
		wantKind(t, ws.Mkdir(ctxOf(t), "d\x00"), opsapi.ErrInvalid)
		_, err = ws.Stat(ctxOf(t), p)
		wantKind(t, err, opsapi.ErrInvalid)
		_, err = ws.ReadDir(ctxOf(t), ".\x00")
		wantKind(t, err, opsapi.ErrInvalid)
		eq(t, "content of a", get(t, ws, "a"), "x")
		eq(t, "listing", fmt.Sprint(names(t, ws, ".")), "[a]")
	})
}

// filesMkdirStat holds the cases of Mkdir and Stat.
func (s *suite) filesMkdirStat(t *testing.T) {
	t.Run("Mkdir_creates_missing_parents", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "a/b/c"))
		fi, err := ws.Stat(ctxOf(t), "a/b/c")
		must(t, err)
		eq(t, "type", fi.Type, opsapi.TypeDir)
	})
	t.Run("Mkdir_existing_directory_is_not_an_error", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "a"))
		put(t, ws, "a/keep", "k")
		must(t, ws.Mkdir(ctxOf(t), "a"))
		must(t, ws.Mkdir(ctxOf(t), "."))
		eq(t, "kept", get(t, ws, "a/keep"), "k")
	})
	t.Run("Mkdir_over_file_is_ErrExist", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "f", "x")
		wantKind(t, ws.Mkdir(ctxOf(t), "f"), opsapi.ErrExist)
		eq(t, "file kept", get(t, ws, "f"), "x")
	})
	t.Run("Mkdir_under_file_is_ErrNotDir", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "f", "x")
		wantKind(t, ws.Mkdir(ctxOf(t), "f/sub"), opsapi.ErrNotDir)
	})
	t.Run("Stat_file_reports_name_type_size_mode", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/f.txt", "12345")
		sh(t, ws, "chmod 0640 d/f.txt")
		fi, err := ws.Stat(ctxOf(t), "d/f.txt")
		must(t, err)
		eq(t, "name", fi.Name, "f.txt")
		eq(t, "type", fi.Type, opsapi.TypeFile)
		eq(t, "size", fi.Size, 5)
		eq(t, "mode", fi.Mode, fs.FileMode(0o640))
		eq(t, "symlink", fi.Symlink, false)
		if d := time.Since(fi.ModTime); d < -time.Hour || d > time.Hour {
			t.Errorf("mtime %v is not around now", fi.ModTime)
		}
	})
	t.Run("Stat_directory_is_TypeDir", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "d"))
		fi, err := ws.Stat(ctxOf(t), "d")
		must(t, err)
		eq(t, "IsDir", fi.IsDir(), true)
		root, err := ws.Stat(ctxOf(t), ws.Root())
		must(t, err)
		eq(t, "root IsDir", root.IsDir(), true)
	})
	t.Run("Stat_missing_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		_, err := ws.Stat(ctxOf(t), "missing")
		wantKind(t, err, opsapi.ErrNotExist)
		_, err = ws.Stat(ctxOf(t), "missing/deeper")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Stat_follows_symlink_and_marks_it", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "target", "123")
		must(t, ws.Mkdir(ctxOf(t), "dir"))
		sh(t, ws, "ln -s target link && ln -s dir dirlink")
		fi, err := ws.Stat(ctxOf(t), "link")
		must(t, err)
		eq(t, "type", fi.Type, opsapi.TypeFile)
		eq(t, "size", fi.Size, 3)
		eq(t, "symlink", fi.Symlink, true)
		di, err := ws.Stat(ctxOf(t), "dirlink")
		must(t, err)
		eq(t, "dir link type", di.Type, opsapi.TypeDir)
	})
}

// filesReadDirRealPath holds the cases of ReadDir and RealPath.
func (s *suite) filesReadDirRealPath(t *testing.T) {
	t.Run("ReadDir_lists_entries_with_types_and_dotfiles", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/file", "abc")
		put(t, ws, "d/.hidden", "h")
		must(t, ws.Mkdir(ctxOf(t), "d/sub"))
		sh(t, ws, "ln -s file d/link && ln -s nowhere d/dangling")
		infos, err := ws.ReadDir(ctxOf(t), "d")
		must(t, err)
		got := map[string]opsapi.FileInfo{}
		for _, fi := range infos {
			got[fi.Name] = fi
		}
		eq(t, "entries", len(infos), 5)
		for name, want := range map[string]opsapi.FileType{
			"file": opsapi.TypeFile, ".hidden": opsapi.TypeFile, "sub": opsapi.TypeDir,
			"link": opsapi.TypeFile, "dangling": opsapi.TypeSymlink,
		} {
			fi, ok := got[name]
			if !ok {
				t.Errorf("entry %q missing from %v", name, infos)
				continue
			}
			eq(t, name+" type", fi.Type, want)
		}
		eq(t, "file size", got["file"].Size, 3)
		eq(t, "link marked", got["link"].Symlink, true)
		eq(t, "dangling marked", got["dangling"].Symlink, true)
	})
	t.Run("ReadDir_empty_directory_is_empty", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "e"))
		eq(t, "entries", len(names(t, ws, "e")), 0)
	})
	t.Run("ReadDir_missing_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		_, err := ws.ReadDir(ctxOf(t), "missing")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("ReadDir_file_is_ErrNotDir", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "f", "x")
		_, err := ws.ReadDir(ctxOf(t), "f")
		wantKind(t, err, opsapi.ErrNotDir)
	})
	t.Run("RealPath_resolves_symlink_aliases_to_one_path", func(t *testing.T) {
		ws := s.parallel(t)
		rs := capability[opsapi.Resolver](t, ws)
		put(t, ws, "real/f", "x")
		sh(t, ws, "ln -s real alias && ln -s alias/f flink")
		want, err := rs.RealPath(ctxOf(t), "real/f")
		must(t, err)
		if !path.IsAbs(want) || path.Base(want) != "f" {
			t.Fatalf("RealPath(real/f) = %q, want an absolute path ending in /f", want)
		}
		for _, p := range []string{"alias/f", "flink", "real/../real/./f", path.Join(ws.Root(), "alias/f")} {
			got, err := rs.RealPath(ctxOf(t), p)
			must(t, err)
			eq(t, "RealPath("+p+")", got, want)
		}
	})
	t.Run("RealPath_missing_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		rs := capability[opsapi.Resolver](t, ws)
		_, err := rs.RealPath(ctxOf(t), "missing")
		wantKind(t, err, opsapi.ErrNotExist)
		sh(t, ws, "ln -s nowhere dangling")
		_, err = rs.RealPath(ctxOf(t), "dangling")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("RealPath_of_root_is_where_exec_runs", func(t *testing.T) {
		ws := s.parallel(t)
		rs := capability[opsapi.Resolver](t, ws)
		got, err := rs.RealPath(ctxOf(t), ".")
		must(t, err)
		eq(t, "RealPath(.)", got+"\n", sh(t, ws, "pwd -P"))
	})
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// cancelingReader yields n bytes and calls cancel once cancelAt bytes have
// been read; it keeps yielding afterwards, as a reader that ignores ctx does.
type cancelingReader struct {
	n, read, cancelAt int
	cancel            func()
}

func (r *cancelingReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	if r.read >= r.cancelAt {
		r.cancel()
	}
	k := min(len(p), r.n-r.read)
	for i := range p[:k] {
		p[i] = 'z'
	}
	r.read += k
	return k, nil
}
