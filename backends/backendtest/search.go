package backendtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// search covers the server-side Search (ripgrep's semantics) and Glob
// (fd's semantics).
func (s *suite) search(t *testing.T) {
	s.searchOptions(t)
	s.searchFilters(t)
	s.searchOddInputs(t)
	s.globPatterns(t)
	s.globFilters(t)
}

// searchOptions holds the cases of ripgrep's output and its options.
func (s *suite) searchOptions(t *testing.T) {
	t.Run("Search_directory_reports_relative_path_line_and_text", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a.txt", "first\nhello world\n")
		put(t, ws, "sub/deep/b.txt", "hello there\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "hello", Path: "."})
		eq(t, "lines", fmtLines(res.Lines), "a.txt:2:hello world:match | sub/deep/b.txt:1:hello there:match")
		eq(t, "limit reached", res.LimitReached, false)
	})
	t.Run("Search_absolute_directory_path_gives_the_same_relative_paths", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/sub/b.txt", "needle\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: ws.Root() + "/d"})
		eq(t, "lines", fmtLines(res.Lines), "sub/b.txt:1:needle:match")
	})
	t.Run("Search_single_file_reports_its_base_name", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "dir/example.txt", "first line\nmatch line\nlast line")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "match", Path: "dir/example.txt"})
		eq(t, "lines", fmtLines(res.Lines), "example.txt:2:match line:match")
	})
	t.Run("Search_context_lines_are_not_matches", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "context.txt", "before\nmatch one\nafter\nfar\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "match", Path: "context.txt", Context: 1})
		eq(t, "lines", fmtLines(res.Lines),
			"context.txt:1:before:ctx | context.txt:2:match one:match | context.txt:3:after:ctx")
	})
	t.Run("Search_limit_stops_and_sets_LimitReached", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "m.txt", "hit 1\nhit 2\nhit 3\nhit 4\nhit 5\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "hit", Path: "m.txt", Limit: 2})
		eq(t, "lines", fmtLines(res.Lines), "m.txt:1:hit 1:match | m.txt:2:hit 2:match")
		eq(t, "limit reached", res.LimitReached, true)
	})
	t.Run("Search_exactly_limit_matches_does_not_set_LimitReached", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "m.txt", "hit 1\nhit 2\nmiss\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "hit", Path: "m.txt", Limit: 2})
		eq(t, "matches", len(res.Lines), 2)
		eq(t, "limit reached", res.LimitReached, false)
	})
	t.Run("Search_default_limit_is_100", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "m.txt", strings.Repeat("hit\n", 150))
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "hit", Path: "m.txt"})
		eq(t, "matches", len(res.Lines), 100)
		eq(t, "limit reached", res.LimitReached, true)
	})
	t.Run("Search_ignoreCase_matches_other_case", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "c.txt", "Hello\nhello\nHELLO\nbye\n")
		eq(t, "case-sensitive", len(searchOK(t, ws, opsapi.SearchRequest{Pattern: "hello", Path: "c.txt"}).Lines), 1)
		eq(t, "ignoreCase", len(searchOK(t, ws, opsapi.SearchRequest{Pattern: "hello", Path: "c.txt", IgnoreCase: true}).Lines), 3)
	})
	t.Run("Search_regex_by_default_literal_when_asked", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "r.txt", "abc\na.c\n(x\n")
		eq(t, "regex", fmtLines(searchOK(t, ws, opsapi.SearchRequest{Pattern: "a.c", Path: "r.txt"}).Lines),
			"r.txt:1:abc:match | r.txt:2:a.c:match")
		eq(t, "literal", fmtLines(searchOK(t, ws, opsapi.SearchRequest{Pattern: "a.c", Path: "r.txt", Literal: true}).Lines),
			"r.txt:2:a.c:match")
		eq(t, "literal paren", fmtLines(searchOK(t, ws, opsapi.SearchRequest{Pattern: "(x", Path: "r.txt", Literal: true}).Lines),
			"r.txt:3:(x:match")
	})
}

// searchFilters holds the cases of what is searched: globs, ignores and hidden files.
func (s *suite) searchFilters(t *testing.T) {
	t.Run("Search_glob_filters_files", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a.go", "needle\n")
		put(t, ws, "b.txt", "needle\n")
		put(t, ws, "sub/c.go", "needle\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: ".", Glob: "*.go"})
		eq(t, "lines", fmtLines(res.Lines), "a.go:1:needle:match | sub/c.go:1:needle:match")
	})
	t.Run("Search_respects_gitignore_in_a_repository", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), ".git"))
		put(t, ws, ".gitignore", "ignored.txt\nbuild/\n")
		put(t, ws, "ignored.txt", "needle\n")
		put(t, ws, "build/out.txt", "needle\n")
		put(t, ws, "kept.txt", "needle\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: "."})
		eq(t, "lines", fmtLines(res.Lines), "kept.txt:1:needle:match")
	})
	t.Run("Search_explicit_file_path_is_searched_even_if_ignored", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), ".git"))
		put(t, ws, ".gitignore", "ignored.txt\n")
		put(t, ws, "ignored.txt", "needle\n")
		eq(t, "lines", fmtLines(searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: "ignored.txt"}).Lines),
			"ignored.txt:1:needle:match")
	})
	t.Run("Search_includes_hidden_files", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, ".hidden/h.txt", "needle\n")
		put(t, ws, ".dotfile", "needle\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: "."})
		eq(t, "lines", fmtLines(res.Lines), ".dotfile:1:needle:match | .hidden/h.txt:1:needle:match")
	})
	t.Run("Search_strips_CRLF_line_endings", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "crlf.txt", "one\r\ntwo\r\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "two", Path: "crlf.txt"})
		eq(t, "lines", fmtLines(res.Lines), "crlf.txt:2:two:match")
	})
}

// searchOddInputs holds the cases of odd bytes, patterns and names.
func (s *suite) searchOddInputs(t *testing.T) {
	t.Run("Search_replaces_invalid_UTF8_in_line_text", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "bad.txt", "ok line\nbad \xff\xfe line\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "bad", Path: "bad.txt"})
		eq(t, "lines", fmtLines(res.Lines), "bad.txt:2:bad \ufffd\ufffd line:match")
	})
	t.Run("Search_no_match_is_empty_not_an_error", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a.txt", "nothing here\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "absent", Path: "."})
		eq(t, "lines", len(res.Lines), 0)
	})
	t.Run("Search_invalid_regex_is_ErrInvalid", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a.txt", "x\n")
		_, err := ws.Search(ctxOf(t), opsapi.SearchRequest{Pattern: "(unclosed", Path: "."})
		wantKind(t, err, opsapi.ErrInvalid)
	})
	t.Run("Search_missing_path_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		_, err := ws.Search(ctxOf(t), opsapi.SearchRequest{Pattern: "x", Path: "missing"})
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Search_flag_like_pattern_is_text_and_never_runs", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "pre.sh", "#!/bin/sh\ntouch pre-ran\ncat \"$1\"\n")
		sh(t, ws, "chmod +x pre.sh")
		put(t, ws, "data.txt", "literal --pre=./pre.sh inside\n")
		res := searchOK(t, ws, opsapi.SearchRequest{Pattern: "--pre=./pre.sh", Path: "."})
		eq(t, "lines", fmtLines(res.Lines), "data.txt:1:literal --pre=./pre.sh inside:match")
		_, err := ws.Stat(ctxOf(t), "pre-ran")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Search_and_Glob_take_dash_leading_paths_as_paths", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "-e", "needle in a dash file\n")
		put(t, ws, "--hidden/x.txt", "needle\n")
		eq(t, "search file", fmtLines(searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: "-e"}).Lines),
			"-e:1:needle in a dash file:match")
		eq(t, "search dir", fmtLines(searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: "--hidden"}).Lines),
			"x.txt:1:needle:match")
		eq(t, "glob dir", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.txt", Dir: "--hidden"}), "x.txt")
	})
	t.Run("Unicode_and_shell_metacharacter_names_round_trip", func(t *testing.T) {
		ws := s.parallel(t)
		name := "sp ace $(touch pwned) `id` 'q\"\\ ü 😀;&|*.txt"
		put(t, ws, "d ir/"+name, "needle\n")
		eq(t, "listing", fmt.Sprint(names(t, ws, "d ir")), "["+name+"]")
		eq(t, "content", get(t, ws, "d ir/"+name), "needle\n")
		eq(t, "search", fmtLines(searchOK(t, ws, opsapi.SearchRequest{Pattern: "needle", Path: "d ir"}).Lines),
			name+":1:needle:match")
		eq(t, "glob", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.txt", Dir: "d ir"}), name)
		var out strings.Builder
		_, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "ls", Cwd: "d ir", Output: &out})
		must(t, err)
		eq(t, "ls", out.String(), name+"\n")
		for _, p := range []string{"pwned", "d ir/pwned"} {
			_, err := ws.Stat(ctxOf(t), p)
			wantKind(t, err, opsapi.ErrNotExist)
		}
	})
}

// globPatterns holds the cases of fd's patterns.
func (s *suite) globPatterns(t *testing.T) {
	t.Run("Glob_basename_pattern_matches_at_any_depth", func(t *testing.T) {
		ws := s.parallel(t)
		for _, p := range []string{"a.spec.ts", "src/b.spec.ts", "src/x/y/c.spec.ts", "src/d.ts"} {
			put(t, ws, p, "")
		}
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.spec.ts", Dir: "."}),
			"a.spec.ts src/b.spec.ts src/x/y/c.spec.ts")
	})
	t.Run("Glob_path_pattern_src_**_spec_ts_is_anchored", func(t *testing.T) {
		ws := s.parallel(t)
		for _, p := range []string{"src/foo/bar/example.spec.ts", "src/foo/bar/example.ts", "lib/other.spec.ts"} {
			put(t, ws, p, "")
		}
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "src/**/*.spec.ts", Dir: "."}),
			"src/foo/bar/example.spec.ts")
	})
	t.Run("Glob_trailing_double_star_lists_the_subtree", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "some/parent/child/file.txt", "")
		put(t, ws, "some/parent/child/deep/more.txt", "")
		put(t, ws, "some/parent/other.txt", "")
		got := globOK(t, ws, opsapi.GlobRequest{Pattern: "some/parent/child/**", Dir: "."})
		for _, want := range []string{"some/parent/child/file.txt", "some/parent/child/deep/more.txt"} {
			if !slices.Contains(strings.Fields(got), want) {
				t.Errorf("paths %q lack %q", got, want)
			}
		}
		if strings.Contains(got, "other.txt") {
			t.Errorf("paths %q include other.txt", got)
		}
	})
	t.Run("Glob_leading_double_star_matches_any_prefix", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "x/y/parent/child/a.txt", "")
		put(t, ws, "parent/child/b.txt", "")
		put(t, ws, "parent/other/c.txt", "")
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "**/parent/child/*", Dir: "."}),
			"parent/child/b.txt x/y/parent/child/a.txt")
	})
	t.Run("Glob_directories_end_in_slash", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "a/target"))
		put(t, ws, "b/target", "")
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "target", Dir: "."}), "a/target/ b/target")
	})
	t.Run("Glob_paths_are_relative_to_Dir", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "d/sub/f.txt", "")
		put(t, ws, "other.txt", "")
		eq(t, "relative Dir", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.txt", Dir: "d"}), "sub/f.txt")
		eq(t, "absolute Dir", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.txt", Dir: ws.Root() + "/d"}), "sub/f.txt")
	})
}

// globFilters holds the cases of what Glob leaves out and its errors.
func (s *suite) globFilters(t *testing.T) {
	t.Run("Glob_includes_hidden_files", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, ".secret/hidden.txt", "")
		put(t, ws, "visible.txt", "")
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.txt", Dir: "."}), ".secret/hidden.txt visible.txt")
	})
	t.Run("Glob_respects_gitignore_outside_a_repository", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, ".gitignore", "ignored.txt\nbuild/\n")
		put(t, ws, "ignored.txt", "")
		put(t, ws, "build/out.txt", "")
		put(t, ws, "kept.txt", "")
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.txt", Dir: "."}), "kept.txt")
	})
	t.Run("Glob_nested_gitignore_is_scoped_to_its_subtree", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a/.gitignore", "*.log\n")
		put(t, ws, "a/x.log", "")
		put(t, ws, "b/y.log", "")
		put(t, ws, "deep/one/.gitignore", "secret.txt\n")
		put(t, ws, "deep/one/two/secret.txt", "")
		put(t, ws, "deep/secret.txt", "")
		eq(t, "logs", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.log", Dir: "."}), "b/y.log")
		eq(t, "secrets", globOK(t, ws, opsapi.GlobRequest{Pattern: "secret.txt", Dir: "."}), "deep/secret.txt")
	})
	t.Run("Glob_Ignore_option_excludes_node_modules", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "node_modules/pkg/index.js", "")
		put(t, ws, "src/node_modules/x/y.js", "")
		put(t, ws, "src/app.js", "")
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "*.js", Dir: ".", Ignore: []string{"**/node_modules/**"}}),
			"src/app.js")
	})
	t.Run("Glob_limit_stops_and_sets_LimitReached", func(t *testing.T) {
		ws := s.parallel(t)
		for i := range 5 {
			put(t, ws, fmt.Sprintf("f%d.txt", i), "")
		}
		res, err := ws.Glob(ctxOf(t), opsapi.GlobRequest{Pattern: "*.txt", Dir: ".", Limit: 3})
		must(t, err)
		eq(t, "results", len(res.Paths), 3)
		eq(t, "limit reached", res.LimitReached, true)
		res, err = ws.Glob(ctxOf(t), opsapi.GlobRequest{Pattern: "*.txt", Dir: ".", Limit: 5})
		must(t, err)
		eq(t, "results at exact limit", len(res.Paths), 5)
		eq(t, "limit reached at exact limit", res.LimitReached, false)
	})
	t.Run("Glob_invalid_pattern_is_ErrInvalid", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a.txt", "")
		_, err := ws.Glob(ctxOf(t), opsapi.GlobRequest{Pattern: "[", Dir: "."})
		wantKind(t, err, opsapi.ErrInvalid)
	})
	t.Run("Glob_missing_dir_is_ErrNotExist", func(t *testing.T) {
		ws := s.parallel(t)
		_, err := ws.Glob(ctxOf(t), opsapi.GlobRequest{Pattern: "*", Dir: "missing"})
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("Glob_flag_like_pattern_--help_matches_nothing", func(t *testing.T) {
		ws := s.parallel(t)
		put(t, ws, "a.txt", "")
		eq(t, "paths", globOK(t, ws, opsapi.GlobRequest{Pattern: "--help", Dir: "."}), "")
	})
}

func searchOK(t *testing.T, ws opsapi.GrepOperations, req opsapi.SearchRequest) opsapi.SearchResult {
	t.Helper()
	res, err := ws.Search(ctxOf(t), req)
	if err != nil {
		t.Fatalf("Search(%+v): %v", req, err)
	}
	return res
}

// fmtLines renders search lines as "path:line:text:match|ctx" joined by
// " | ", files in path order (ripgrep's directory order is not fixed),
// lines of one file in the order given.
func fmtLines(lines []opsapi.SearchLine) string {
	lines = slices.Clone(lines)
	slices.SortStableFunc(lines, func(a, b opsapi.SearchLine) int { return strings.Compare(a.Path, b.Path) })
	var b []string
	for _, l := range lines {
		kind := "ctx"
		if l.Match {
			kind = "match"
		}
		b = append(b, fmt.Sprintf("%s:%d:%s:%s", l.Path, l.Line, l.Text, kind))
	}
	return strings.Join(b, " | ")
}

// globOK returns the sorted result paths joined by spaces.
func globOK(t *testing.T, ws opsapi.FindOperations, req opsapi.GlobRequest) string {
	t.Helper()
	res, err := ws.Glob(ctxOf(t), req)
	if err != nil {
		t.Fatalf("Glob(%+v): %v", req, err)
	}
	p := slices.Clone(res.Paths)
	slices.Sort(p)
	return strings.Join(p, " ")
}
