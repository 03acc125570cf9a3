package backendtest

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
)

// editArgs builds edit arguments from oldText/newText pairs.
func editArgs(p string, pairs ...string) string {
	var edits []map[string]any
	for i := 0; i+1 < len(pairs); i += 2 {
		edits = append(edits, map[string]any{"oldText": pairs[i], "newText": pairs[i+1]})
	}
	return js(map[string]any{"path": p, "edits": edits})
}

// requirePermissionBits skips when the workspace's user is not bound by
// permission bits (root), so EACCES cannot happen.
func requirePermissionBits(t *testing.T, ws opsapi.Operations) {
	t.Helper()
	put(t, ws, ".perm-probe", "")
	_, res := run(t, ws, "chmod 444 .perm-probe && test -w .perm-probe; s=$?; rm -f .perm-probe; exit $s")
	if res.ExitCode == 0 {
		t.Skip("the workspace user writes read-only files (root): EACCES cannot occur")
	}
}

func (s *suite) toolEdit(t *testing.T) {
	s.editReplies(t)
	s.editFiles(t)
	s.editLegacyArgs(t)
}

// editReplies holds the cases of what edit answers.
func (s *suite) editReplies(t *testing.T) {
	t.Run("replace_reports_Successfully_replaced_with_diff", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "Hello, world!\nsecond\n")
		r := call(t, tb, "edit", editArgs("f.txt", "world", "testing"))
		eq(t, "text", textOf(r), "Successfully replaced 1 block(s) in f.txt.")
		eq(t, "content", get(t, ws, "f.txt"), "Hello, testing!\nsecond\n")
		d := detailsOf(t, r)
		diff, _ := d["diff"].(string)
		contains(t, "details.diff", diff, "testing")
		eq(t, "details.firstChangedLine", d["firstChangedLine"], any(1.0))
	})
	t.Run("not_found_single_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "Hello\n")
		got := fails(t, tb, "edit", editArgs(abs, "absent", "x"))
		matches(t, "text", got, `Could not find the exact text`)
		eq(t, "text", got, "Could not find the exact text in "+abs+". The old text must match exactly including all whitespace and newlines.")
	})
	t.Run("not_found_multi_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "Hello\nworld\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "Hello", "Hi", "absent", "x")),
			"Could not find edits[1] in "+abs+". The oldText must match exactly including all whitespace and newlines.")
	})
	t.Run("occurrences_single_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "foo foo foo")
		got := fails(t, tb, "edit", editArgs(abs, "foo", "bar"))
		matches(t, "text", got, `Found 3 occurrences`)
		eq(t, "text", got, "Found 3 occurrences of the text in "+abs+". The text must be unique. Please provide more context to make it unique.")
	})
	t.Run("occurrences_multi_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "one\ntwo two\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "one", "1", "two", "2")),
			"Found 2 occurrences of edits[1] in "+abs+". Each oldText must be unique. Please provide more context to make it unique.")
	})
	t.Run("empty_oldText_single_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "content\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "", "x")), "oldText must not be empty in "+abs+".")
	})
	t.Run("empty_oldText_multi_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "content\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "content", "x", "", "y")), "edits[1].oldText must not be empty in "+abs+".")
	})
	t.Run("overlap_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "abcdef\n")
		got := fails(t, tb, "edit", editArgs(abs, "abc", "X", "bcd", "Y"))
		matches(t, "text", got, `overlap`)
		eq(t, "text", got, "edits[0] and edits[1] overlap in "+abs+". Merge them into one edit or target disjoint regions.")
		eq(t, "content", get(t, ws, "f.txt"), "abcdef\n")
	})
	t.Run("no_changes_single_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "same\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "same", "same")),
			"No changes made to "+abs+". The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.")
	})
	t.Run("no_changes_multi_exact_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "one\ntwo\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "one", "one", "two", "two")),
			"No changes made to "+abs+". The replacements produced identical content.")
	})
}

// editFiles holds the cases of the file edit changes and of several edits.
func (s *suite) editFiles(t *testing.T) {
	t.Run("missing_file_is_Error_code_ENOENT", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "missing.txt")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "a", "b")), "Could not edit file: "+abs+". Error code: ENOENT.")
	})
	t.Run("read_only_file_is_Error_code_EACCES", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		requirePermissionBits(t, ws)
		abs := path.Join(ws.Root(), "ro.txt")
		put(t, ws, "ro.txt", "keep\n")
		sh(t, ws, "chmod 444 ro.txt")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "keep", "changed")), "Could not edit file: "+abs+". Error code: EACCES.")
		eq(t, "content", get(t, ws, "ro.txt"), "keep\n")
	})
	t.Run("two_disjoint_edits_exact_content", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "alpha\nbeta\ngamma\ndelta\n")
		eq(t, "text", ok(t, tb, "edit", editArgs("f.txt", "alpha", "ALPHA", "gamma", "GAMMA")), "Successfully replaced 2 block(s) in f.txt.")
		eq(t, "content", get(t, ws, "f.txt"), "ALPHA\nbeta\nGAMMA\ndelta\n")
	})
	t.Run("edits_match_against_the_original_not_incrementally", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "foo\nbar\nbaz\n")
		ok(t, tb, "edit", editArgs("f.txt", "foo\n", "foo bar\n", "bar\n", "BAR\n"))
		eq(t, "content", get(t, ws, "f.txt"), "foo bar\nBAR\nbaz\n")
	})
	t.Run("empty_edits_array_is_an_error", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "x\n")
		contains(t, "text", fails(t, tb, "edit", `{"path":"f.txt","edits":[]}`), "edits must contain at least one replacement")
	})
	t.Run("one_failing_edit_leaves_the_file_unchanged", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "one\ntwo\nthree\n")
		fails(t, tb, "edit", editArgs("f.txt", "one", "1", "absent", "x", "three", "3"))
		eq(t, "content", get(t, ws, "f.txt"), "one\ntwo\nthree\n")
	})
	t.Run("600_line_file_diff_elides_far_context", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "big.txt", numbered("line ", 600)+"\n")
		r := call(t, tb, "edit", editArgs("big.txt", "line 10\n", "LINE TEN\n", "line 300\n", "LINE 300\n", "line 590\n", "LINE 590\n"))
		eq(t, "text", textOf(r), "Successfully replaced 3 block(s) in big.txt.")
		diff, _ := detailsOf(t, r)["diff"].(string)
		contains(t, "diff", diff, "...")
		contains(t, "diff", diff, "LINE TEN")
		contains(t, "diff", diff, "LINE 590")
		lacks(t, "diff", diff, "line 150\n")
		lacks(t, "diff", diff, "line 450\n")
		if n := strings.Count(diff, "\n") + 1; n >= 50 {
			t.Fatalf("diff has %d lines, want < 50:\n%s", n, diff)
		}
	})
}

// editLegacyArgs holds the cases of the older argument shapes pi still accepts.
func (s *suite) editLegacyArgs(t *testing.T) {
	t.Run("legacy_top_level_oldText_newText_is_folded", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "legacy.txt", "old value\n")
		r := call(t, tb, "edit", `{"path":"legacy.txt","oldText":"old","newText":"new"}`)
		eq(t, "error", r.IsError, false)
		eq(t, "content blocks", len(r.Content), 1)
		eq(t, "text", textOf(r), "Successfully replaced 1 block(s) in legacy.txt.")
		eq(t, "content", get(t, ws, "legacy.txt"), "new value\n")
	})
	t.Run("legacy_pair_is_appended_to_existing_edits", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "one\ntwo\n")
		eq(t, "text", ok(t, tb, "edit", `{"path":"f.txt","edits":[{"oldText":"one","newText":"1"}],"oldText":"two","newText":"2"}`),
			"Successfully replaced 2 block(s) in f.txt.")
		eq(t, "content", get(t, ws, "f.txt"), "1\n2\n")
	})
	t.Run("edits_given_as_a_JSON_string_are_parsed", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "one\n")
		ok(t, tb, "edit", js(map[string]any{"path": "f.txt", "edits": `[{"oldText":"one","newText":"uno"}]`}))
		eq(t, "content", get(t, ws, "f.txt"), "uno\n")
	})
	t.Run("edits_as_invalid_JSON_string_fail_validation", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "one\n")
		got := fails(t, tb, "edit", js(map[string]any{"path": "f.txt", "edits": `[{"oldText":`}))
		if !strings.HasPrefix(got, "Validation failed for tool \"edit\":\n  - ") {
			t.Fatalf("text = %q", got)
		}
		eq(t, "content", get(t, ws, "f.txt"), "one\n")
	})
	t.Run("preserves_mode_and_NUL_bytes", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "run.sh", "#!/bin/sh\x00\necho old\n")
		sh(t, ws, "chmod 0755 run.sh")
		ok(t, tb, "edit", editArgs("run.sh", "echo old", "echo new"))
		eq(t, "content", get(t, ws, "run.sh"), "#!/bin/sh\x00\necho new\n")
		fi, err := ws.Stat(ctxOf(t), "run.sh")
		must(t, err)
		eq(t, "mode", fi.Mode.Perm(), 0o755)
	})
	t.Run("through_a_symlink_edits_the_target_and_keeps_the_link", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "target.txt", "before\n")
		sh(t, ws, "ln -s target.txt alias.txt")
		ok(t, tb, "edit", editArgs("alias.txt", "before", "after"))
		eq(t, "target", get(t, ws, "target.txt"), "after\n")
		eq(t, "still a link", sh(t, ws, "test -L alias.txt && echo link"), "link\n")
	})
}

func (s *suite) toolFuzzy(t *testing.T) {
	for _, c := range []struct{ name, file, oldText, newText, want string }{
		{"trailing_whitespace_tolerated", "line one   \nline two  \nline three\n", "line one\nline two\n", "replaced\n", "replaced\nline three\n"},
		{"smart_single_quotes", "console.log(\u2018hello\u2019);\nnext\n", "console.log('hello');", "console.log('world');", "console.log('world');\nnext\n"},
		{"smart_double_quotes", "say \u201chi\u201d now\n", `say "hi" now`, `say "bye" now`, "say \"bye\" now\n"},
		{"en_and_em_dashes", "a \u2013 b \u2014 c\n", "a - b - c", "x", "x\n"},
		{"non_breaking_space", "hello\u00a0world\n", "hello world", "hi", "hi\n"},
		{"full_width_ascii_NFKC", "\uff21\uff22\uff23\uff11\uff12\uff13\n", "ABC123", "done", "done\n"},
		{"combining_accent_NFKC", "cafe\u0301 time\n", "caf\u00e9 time", "tea time", "tea time\n"},
		{"CJK_full_width_punctuation", "\u4f60\u597d\uff0c\u4e16\u754c\uff01\n", "\u4f60\u597d,\u4e16\u754c!", "hello", "hello\n"},
		{"untouched_lines_keep_trailing_spaces_and_quotes", "keep   \n\u201cq\u201d stays\nsay \u201chi\u201d\ntail  \n", `say "hi"`, `say "bye"`,
			"keep   \n\u201cq\u201d stays\nsay \"bye\"\ntail  \n"},
		{"exact_match_preferred_keeps_smart_quotes_elsewhere", "a \u201cq\u201d here\nfoo\n", "foo", "bar", "a \u201cq\u201d here\nbar\n"},
		{"CRLF_file_matched_by_LF_oldText_keeps_CRLF", "first\r\nsecond\r\nthird\r\n", "second\n", "REPLACED\n", "first\r\nREPLACED\r\nthird\r\n"},
		{"CRLF_file_multi_line_newText_gets_CRLF", "a\r\nb\r\n", "a\n", "x\ny\n", "x\r\ny\r\nb\r\n"},
		{"LF_file_stays_LF", "first\nsecond\nthird\n", "second\n", "REPLACED\n", "first\nREPLACED\nthird\n"},
		{"BOM_preserved", "\ufefffirst\nsecond\n", "second", "SECOND", "\ufefffirst\nSECOND\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, tb := s.toolsFor(t, tools.Options{})
			put(t, ws, "f.txt", c.file)
			eq(t, "text", ok(t, tb, "edit", editArgs("f.txt", c.oldText, c.newText)), "Successfully replaced 1 block(s) in f.txt.")
			eq(t, "content", get(t, ws, "f.txt"), c.want)
		})
	}
	t.Run("BOM_and_CRLF_in_multi_edit", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "\ufeffone\r\ntwo\r\nthree\r\n")
		eq(t, "text", ok(t, tb, "edit", editArgs("f.txt", "one", "ONE", "three\n", "THREE\n")), "Successfully replaced 2 block(s) in f.txt.")
		eq(t, "content", get(t, ws, "f.txt"), "\ufeffONE\r\ntwo\r\nTHREE\r\n")
	})
	t.Run("fuzzy_in_multi_edit", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", "first \u201cx\u201d\nsecond\n")
		eq(t, "text", ok(t, tb, "edit", editArgs("f.txt", `first "x"`, "FIRST", "second", "SECOND")), "Successfully replaced 2 block(s) in f.txt.")
		eq(t, "content", get(t, ws, "f.txt"), "FIRST\nSECOND\n")
	})
	t.Run("fuzzy_still_fails_when_absent", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "say \u201chi\u201d\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, `say "bye"`, "x")),
			"Could not find the exact text in "+abs+". The old text must match exactly including all whitespace and newlines.")
	})
	t.Run("duplicates_after_normalization_are_Found_2_occurrences", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "\u201ca\u201d\n\"a\"\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, `"a"`, "b")),
			"Found 2 occurrences of the text in "+abs+". The text must be unique. Please provide more context to make it unique.")
	})
	t.Run("duplicates_across_CRLF_and_LF_are_counted", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "f.txt")
		put(t, ws, "f.txt", "dup line\r\nmiddle\ndup line\r\n")
		eq(t, "text", fails(t, tb, "edit", editArgs(abs, "dup line\n", "x\n")),
			"Found 2 occurrences of the text in "+abs+". The text must be unique. Please provide more context to make it unique.")
	})
}

func (s *suite) toolQueue(t *testing.T) {
	t.Run("two_parallel_edits_of_one_file_both_apply", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		for round := range 10 {
			put(t, ws, "f.txt", "alpha\nbeta\n")
			var wg sync.WaitGroup
			wg.Go(func() { okGo(t, tb, "edit", editArgs("f.txt", "alpha", "ALPHA")) })
			wg.Go(func() { okGo(t, tb, "edit", editArgs("f.txt", "beta", "BETA")) })
			wg.Wait()
			eq(t, fmt.Sprintf("content after round %d", round), get(t, ws, "f.txt"), "ALPHA\nBETA\n")
		}
	})
	t.Run("twenty_parallel_edits_of_one_file_all_apply", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", numbered("line ", 20)+"\n")
		var wg sync.WaitGroup
		for i := 1; i <= 20; i++ {
			wg.Go(func() {
				okGo(t, tb, "edit", editArgs("f.txt", fmt.Sprintf("line %d\n", i), fmt.Sprintf("LINE %d\n", i)))
			})
		}
		wg.Wait()
		eq(t, "content", get(t, ws, "f.txt"), numbered("LINE ", 20)+"\n")
	})
	t.Run("edit_then_write_write_wins", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		// A large file makes the edit slow, so without a queue the edit
		// would write its stale result after the write.
		big := strings.Repeat("filler line\n", 400_000) + "marker\n"
		put(t, ws, "f.txt", big)
		ctx := ctxOf(t)
		var wg sync.WaitGroup
		wg.Go(func() { tb.Call(ctx, "edit", json.RawMessage(editArgs("f.txt", "marker", "EDITED")), nil) })
		time.Sleep(5 * time.Millisecond)
		wg.Go(func() { okGo(t, tb, "write", `{"path":"f.txt","content":"written last\n"}`) })
		wg.Wait()
		eq(t, "content", get(t, ws, "f.txt"), "written last\n")
	})
	t.Run("parallel_edits_through_a_symlink_alias_share_the_queue", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		capability[opsapi.Resolver](t, ws)
		sh(t, ws, "ln -s f.txt alias.txt")
		for round := range 10 {
			put(t, ws, "f.txt", "alpha\nbeta\n")
			var wg sync.WaitGroup
			wg.Go(func() { okGo(t, tb, "edit", editArgs("f.txt", "alpha", "ALPHA")) })
			wg.Go(func() { okGo(t, tb, "edit", editArgs("alias.txt", "beta", "BETA")) })
			wg.Wait()
			eq(t, fmt.Sprintf("content after round %d", round), get(t, ws, "f.txt"), "ALPHA\nBETA\n")
		}
	})
	t.Run("parallel_writes_of_different_files_all_land", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				okGo(t, tb, "write", js(map[string]any{"path": fmt.Sprintf("d/f%d.txt", i), "content": fmt.Sprint(i)}))
			})
		}
		wg.Wait()
		for i := range 10 {
			eq(t, "content", get(t, ws, fmt.Sprintf("d/f%d.txt", i)), fmt.Sprint(i))
		}
	})
}
