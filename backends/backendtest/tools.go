package backendtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
)

// toolbox returns a fresh workspace and the tools over it.
func (s *suite) toolsFor(t *testing.T, opts tools.Options) (opsapi.Operations, *tools.Toolbox) {
	t.Helper()
	ws := s.parallel(t)
	tb := tools.New(ws, opts)
	t.Cleanup(func() { _ = tb.Close() })
	return ws, tb
}

// js encodes tool arguments.
func js(args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// textOf joins the text blocks of a result.
func textOf(r tools.Result) string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func call(t *testing.T, tb *tools.Toolbox, name, args string) tools.Result {
	t.Helper()
	return tb.Call(ctxOf(t), name, json.RawMessage(args), nil)
}

// ok calls a tool that must succeed and returns its text.
func ok(t *testing.T, tb *tools.Toolbox, name, args string) string {
	t.Helper()
	r := call(t, tb, name, args)
	if r.IsError {
		t.Fatalf("%s %s: unexpected error %q", name, args, textOf(r))
	}
	return textOf(r)
}

// okGo is ok for other goroutines: it reports with Errorf.
func okGo(t *testing.T, tb *tools.Toolbox, name, args string) {
	r := tb.Call(t.Context(), name, json.RawMessage(args), nil)
	if r.IsError {
		t.Errorf("%s %s: unexpected error %q", name, args, textOf(r))
	}
}

// fails calls a tool that must fail and returns its error text.
func fails(t *testing.T, tb *tools.Toolbox, name, args string) string {
	t.Helper()
	r := call(t, tb, name, args)
	if !r.IsError {
		t.Fatalf("%s %s: succeeded with %q, want an error", name, args, textOf(r))
	}
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("%s %s: error result has content %+v, want one text block", name, args, r.Content)
	}
	return textOf(r)
}

// detailsOf returns a result's details as generic JSON, nil when absent.
func detailsOf(t *testing.T, r tools.Result) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.Details)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(b, &m))
	return m
}

func contains(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s does not contain %q:\n%s", what, sub, s)
	}
}

func lacks(t *testing.T, what, s, sub string) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Fatalf("%s contains %q:\n%s", what, sub, s)
	}
}

func matches(t *testing.T, what, s, re string) {
	t.Helper()
	if !regexp.MustCompile(re).MatchString(s) {
		t.Fatalf("%s does not match /%s/:\n%s", what, re, s)
	}
}

// numbered returns "<prefix>1\n<prefix>2..." for n lines, without a
// trailing newline.
func numbered(prefix string, n int) string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return strings.Join(lines, "\n")
}

func tinyPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	img.Set(1, 1, color.RGBA{B: 255, A: 255})
	var b bytes.Buffer
	must(t, png.Encode(&b, img))
	return b.Bytes()
}

func (s *suite) toolbox(t *testing.T) {
	t.Run("full_workspace_defines_all_seven_tools_in_pi_order", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		var got []string
		for _, d := range tb.Definitions() {
			got = append(got, d.Name)
		}
		eq(t, "names", strings.Join(got, ","), "read,bash,edit,write,grep,find,ls")
	})
	t.Run("unknown_tool_is_Tool_x_not_found", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "nope", `{}`), "Tool nope not found")
	})
	t.Run("validation_failure_text_for_read", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		got := fails(t, tb, "read", `{}`)
		if !strings.HasPrefix(got, "Validation failed for tool \"read\":\n  - ") {
			t.Fatalf("text = %q, want the validation prefix", got)
		}
		contains(t, "text", got, "path")
		if !strings.HasSuffix(got, "\n\nReceived arguments:\n{}") {
			t.Fatalf("text = %q, want the received arguments at the end", got)
		}
	})
	t.Run("validation_failure_echoes_arguments_indented", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		got := fails(t, tb, "read", `{"path":"a.txt","offset":"abc"}`)
		if !strings.HasPrefix(got, "Validation failed for tool \"read\":\n  - ") {
			t.Fatalf("text = %q, want the validation prefix", got)
		}
		contains(t, "text", got, "offset")
		contains(t, "text", got, "\n\nReceived arguments:\n{\n  \"path\": \"a.txt\",\n  \"offset\": \"abc\"\n}")
	})
	t.Run("validation_coerces_numeric_strings", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "n.txt", "1\n2\n3\n4\n5")
		eq(t, "text", ok(t, tb, "read", `{"path":"n.txt","offset":"2","limit":"2"}`),
			"2\n3\n\n[2 more lines in file. Use offset=4 to continue.]")
	})
}

func (s *suite) toolRead(t *testing.T) {
	s.readText(t)
	s.readImagesAndPaths(t)
}

// readText holds the cases of text files, truncation and paging.
func (s *suite) readText(t *testing.T) {
	t.Run("small_file_returned_verbatim_without_details", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "small.txt", "Hello, world!\nSecond line\r\n\ttabbed")
		r := call(t, tb, "read", js(map[string]any{"path": "small.txt"}))
		eq(t, "error", r.IsError, false)
		eq(t, "text", textOf(r), "Hello, world!\nSecond line\r\n\ttabbed")
		eq(t, "details", detailsOf(t, r) == nil, true)
	})
	t.Run("missing_file_error_mentions_ENOENT_or_not_found", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		matches(t, "error", fails(t, tb, "read", `{"path":"missing.txt"}`), `(?i)ENOENT|not found`)
	})
	t.Run("2500_lines_truncated_by_lines_with_notice_and_details", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "long.txt", numbered("Line ", 2500))
		r := call(t, tb, "read", `{"path":"long.txt"}`)
		got := textOf(r)
		contains(t, "text", got, "Line 1\n")
		contains(t, "text", got, "Line 2000\n")
		lacks(t, "text", got, "Line 2001")
		if !strings.HasSuffix(got, "Line 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]") {
			t.Fatalf("text ends %q", got[max(0, len(got)-120):])
		}
		tr, _ := detailsOf(t, r)["truncation"].(map[string]any)
		eq(t, "truncated", tr["truncated"], any(true))
		eq(t, "truncatedBy", tr["truncatedBy"], any("lines"))
		eq(t, "totalLines", tr["totalLines"], any(2500.0))
		eq(t, "outputLines", tr["outputLines"], any(2000.0))
	})
	t.Run("long_lines_truncated_by_bytes_with_exact_notice", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		lines := make([]string, 500)
		for i := range lines {
			lines[i] = fmt.Sprintf("Line %03d ", i+1) + strings.Repeat("x", 200) // 209 bytes
		}
		put(t, ws, "wide.txt", strings.Join(lines, "\n"))
		got := ok(t, tb, "read", `{"path":"wide.txt"}`)
		matches(t, "notice", got, `\[Showing lines 1-\d+ of 500 \(.* limit\)\. Use offset=\d+ to continue\.\]`)
		if !strings.HasSuffix(got, lines[242]+"\n\n[Showing lines 1-243 of 500 (50.0KB limit). Use offset=244 to continue.]") {
			t.Fatalf("text ends %q", got[max(0, len(got)-120):])
		}
	})
	t.Run("offset_51_starts_at_line_51", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", numbered("Line ", 100))
		got := ok(t, tb, "read", `{"path":"f.txt","offset":51}`)
		if !strings.HasPrefix(got, "Line 51\n") || !strings.HasSuffix(got, "Line 100") {
			t.Fatalf("text = %q...", got[:min(40, len(got))])
		}
		lacks(t, "text", got, "Line 50\n")
	})
	t.Run("limit_10_notice_90_more_lines", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", numbered("Line ", 100))
		eq(t, "text", ok(t, tb, "read", `{"path":"f.txt","limit":10}`),
			numbered("Line ", 10)+"\n\n[90 more lines in file. Use offset=11 to continue.]")
	})
	t.Run("offset_41_limit_20_notice_40_more_lines", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", numbered("Line ", 100))
		got := ok(t, tb, "read", `{"path":"f.txt","offset":41,"limit":20}`)
		if !strings.HasPrefix(got, "Line 41\n") {
			t.Fatalf("text starts %q", got[:min(40, len(got))])
		}
		if !strings.HasSuffix(got, "Line 60\n\n[40 more lines in file. Use offset=61 to continue.]") {
			t.Fatalf("text ends %q", got[max(0, len(got)-80):])
		}
	})
	t.Run("offset_beyond_end_is_an_error", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "short.txt", "Line 1\nLine 2\nLine 3")
		eq(t, "text", fails(t, tb, "read", `{"path":"short.txt","offset":100}`),
			"Offset 100 is beyond end of file (3 lines total)")
	})
	t.Run("first_line_over_50KB_gives_the_sed_hint", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "big.txt", strings.Repeat("a", 61440)+"\nsecond")
		r := call(t, tb, "read", `{"path":"big.txt"}`)
		eq(t, "text", textOf(r), "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' big.txt | head -c 51200]")
		if detailsOf(t, r)["truncation"] == nil {
			t.Error("details.truncation missing")
		}
	})
}

// readImagesAndPaths holds the cases of images and of path forms.
func (s *suite) readImagesAndPaths(t *testing.T) {
	t.Run("PNG_bytes_in_image_txt_are_an_image", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		must(t, ws.WriteFile(ctxOf(t), "image.txt", bytes.NewReader(tinyPNG(t))))
		r := call(t, tb, "read", `{"path":"image.txt"}`)
		eq(t, "error", r.IsError, false)
		if len(r.Content) != 2 {
			t.Fatalf("content = %+v, want text and image", r.Content)
		}
		eq(t, "text", r.Content[0].Text, "Read image file [image/png]")
		eq(t, "block type", r.Content[1].Type, "image")
		eq(t, "mime", r.Content[1].MimeType, "image/png")
		data, err := base64.StdEncoding.DecodeString(r.Content[1].Data)
		must(t, err)
		img, err := png.Decode(bytes.NewReader(data))
		must(t, err)
		eq(t, "width", img.Bounds().Dx(), 2)
	})
	t.Run("GIF_and_JPEG_are_images_by_content", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		img := image.NewPaletted(image.Rect(0, 0, 3, 3), color.Palette{color.Black, color.White})
		var g, j bytes.Buffer
		must(t, gif.Encode(&g, img, nil))
		must(t, jpeg.Encode(&j, img, nil))
		must(t, ws.WriteFile(ctxOf(t), "pic.dat", bytes.NewReader(g.Bytes())))
		must(t, ws.WriteFile(ctxOf(t), "photo", bytes.NewReader(j.Bytes())))
		for file, mime := range map[string]string{"pic.dat": "image/gif", "photo": "image/jpeg"} {
			r := call(t, tb, "read", js(map[string]any{"path": file}))
			if len(r.Content) != 2 || r.Content[1].Type != "image" {
				t.Fatalf("%s: content %+v, want text and image", file, r.Content)
			}
			eq(t, file+" text", r.Content[0].Text, "Read image file ["+mime+"]")
			eq(t, file+" mime", r.Content[1].MimeType, mime)
		}
	})
	t.Run("wide_PNG_is_resized_with_the_coordinate_hint", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		var b bytes.Buffer
		must(t, png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3000, 1000))))
		must(t, ws.WriteFile(ctxOf(t), "wide.png", bytes.NewReader(b.Bytes())))
		r := call(t, tb, "read", `{"path":"wide.png"}`)
		if len(r.Content) != 2 {
			t.Fatalf("content = %+v", r.Content)
		}
		eq(t, "text", r.Content[0].Text, "Read image file [image/png]\n"+
			"[Image: original 3000x1000, displayed at 2000x667. Multiply coordinates by 1.50 to map to original image.]")
		data, err := base64.StdEncoding.DecodeString(r.Content[1].Data)
		must(t, err)
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		must(t, err)
		eq(t, "size", fmt.Sprintf("%dx%d", cfg.Width, cfg.Height), "2000x667")
	})
	t.Run("text_in_not_an_image_png_is_text", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "not-an-image.png", "definitely not a png")
		r := call(t, tb, "read", `{"path":"not-an-image.png"}`)
		eq(t, "blocks", len(r.Content), 1)
		eq(t, "text", textOf(r), "definitely not a png")
	})
	t.Run("at_prefix_tilde_and_unicode_spaces_resolve_in_the_workspace", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "dir/file name.txt", "found")
		for _, p := range []string{"@dir/file name.txt", "~/dir/file name.txt", "dir/file\u00a0name.txt",
			path.Join(ws.Root(), "dir/file name.txt")} {
			eq(t, "read "+p, ok(t, tb, "read", js(map[string]any{"path": p})), "found")
		}
	})
	t.Run("directory_is_an_error", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		must(t, ws.Mkdir(ctxOf(t), "d"))
		fails(t, tb, "read", `{"path":"d"}`)
	})
}

func (s *suite) toolWrite(t *testing.T) {
	t.Run("reports_Successfully_wrote_to_path_without_details", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		r := call(t, tb, "write", `{"path":"out.txt","content":"hello\n"}`)
		eq(t, "text", textOf(r), "Successfully wrote to out.txt")
		eq(t, "details", detailsOf(t, r) == nil, true)
		eq(t, "content", get(t, ws, "out.txt"), "hello\n")
	})
	t.Run("creates_nested_parent_directories", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", ok(t, tb, "write", `{"path":"a/b/c/deep.txt","content":"deep"}`), "Successfully wrote to a/b/c/deep.txt")
		eq(t, "content", get(t, ws, "a/b/c/deep.txt"), "deep")
	})
	t.Run("overwrites_byte_exact_without_CRLF_or_BOM_handling", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f.txt", strings.Repeat("old\n", 1000))
		content := "\ufeffcrlf\r\nemoji 😀 € \x00nul\n"
		ok(t, tb, "write", js(map[string]any{"path": "f.txt", "content": content}))
		eq(t, "content", get(t, ws, "f.txt"), content)
	})
	t.Run("absolute_path_inside_the_workspace", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		abs := path.Join(ws.Root(), "abs.txt")
		eq(t, "text", ok(t, tb, "write", js(map[string]any{"path": abs, "content": "x"})), "Successfully wrote to "+abs)
		eq(t, "content", get(t, ws, "abs.txt"), "x")
	})
	t.Run("onto_a_directory_is_an_error", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		must(t, ws.Mkdir(ctxOf(t), "d"))
		fails(t, tb, "write", `{"path":"d","content":"x"}`)
	})
}

func (s *suite) toolBash(t *testing.T) {
	s.bashBasics(t)
	s.bashOutput(t)
}

// bashBasics holds the cases of exit statuses, timeouts and options.
func (s *suite) bashBasics(t *testing.T) {
	t.Run("echo_returns_its_output", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		r := call(t, tb, "bash", `{"command":"echo hello; echo world >&2"}`)
		eq(t, "error", r.IsError, false)
		eq(t, "text", textOf(r), "hello\nworld\n")
		eq(t, "details", detailsOf(t, r) == nil, true)
	})
	t.Run("no_output_text", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", ok(t, tb, "bash", `{"command":"true"}`), "(no output)")
	})
	t.Run("exit_1_is_Command_exited_with_code_1_error", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "bash", `{"command":"exit 1"}`), "(no output)\n\nCommand exited with code 1")
		got := fails(t, tb, "bash", `{"command":"echo partial; exit 3"}`)
		contains(t, "text", got, "partial")
		if !strings.HasSuffix(got, "\n\nCommand exited with code 3") {
			t.Fatalf("text = %q", got)
		}
	})
	t.Run("signal_is_reported_as_128_plus_N", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "bash", `{"command":"kill -KILL $$"}`), "(no output)\n\nCommand exited with code 137")
	})
	t.Run("timeout_is_Command_timed_out_after_1_seconds", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		got := fails(t, tb, "bash", `{"command":"echo started; sleep 5","timeout":1}`)
		matches(t, "text", got, `(?i)timed out`)
		contains(t, "text", got, "started")
		contains(t, "text", got, "Command timed out after 1 seconds")
	})
	t.Run("fractional_timeout_is_printed_as_given", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "bash", `{"command":"sleep 5","timeout":0.5}`), "Command timed out after 0.5 seconds")
	})
	t.Run("invalid_timeout_is_rejected_before_running", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "bash", `{"command":"touch ran","timeout":-1}`),
			"Invalid timeout: must be a finite number of seconds")
		_, err := ws.Stat(ctxOf(t), "ran")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("missing_cwd_is_Working_directory_does_not_exist", func(t *testing.T) {
		ws := s.parallel(t)
		tb := tools.New(ws, tools.Options{Cwd: "no/such/dir"})
		t.Cleanup(func() { _ = tb.Close() })
		got := fails(t, tb, "bash", `{"command":"echo hi"}`)
		contains(t, "text", got, "Working directory does not exist")
		eq(t, "text", got, "Working directory does not exist: "+path.Join(ws.Root(), "no/such/dir")+"\nCannot execute bash commands.")
	})
	t.Run("cwd_option_is_honoured", func(t *testing.T) {
		ws := s.parallel(t)
		must(t, ws.Mkdir(ctxOf(t), "sub"))
		tb := tools.New(ws, tools.Options{Cwd: "sub"})
		t.Cleanup(func() { _ = tb.Close() })
		eq(t, "pwd", ok(t, tb, "bash", `{"command":"pwd"}`), path.Join(ws.Root(), "sub")+"\n")
	})
	t.Run("env_option_reaches_the_command", func(t *testing.T) {
		ws := s.parallel(t)
		tb := tools.New(ws, tools.Options{Env: []string{"GREETING=hi there"}})
		t.Cleanup(func() { _ = tb.Close() })
		eq(t, "text", ok(t, tb, "bash", `{"command":"echo \"$GREETING\""}`), "hi there\n")
	})
}

// bashOutput holds the cases of long, late, odd and aborted output.
func (s *suite) bashOutput(t *testing.T) {
	t.Run("seq_3000_truncated_with_full_output_readable_afterwards", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		r := call(t, tb, "bash", `{"command":"seq 3000"}`)
		eq(t, "error", r.IsError, false)
		got := textOf(r)
		m := regexp.MustCompile(`\n\n\[Showing lines 1001-3000 of 3000\. Full output: (.+)\]$`).FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("text ends %q", got[max(0, len(got)-120):])
		}
		if !strings.HasPrefix(got, "1001\n") || !strings.Contains(got, "\n3000\n\n[") {
			t.Fatalf("text does not hold lines 1001-3000: starts %q", got[:20])
		}
		full := m[1]
		d := detailsOf(t, r)
		eq(t, "details.fullOutputPath", d["fullOutputPath"], any(full))
		tr, _ := d["truncation"].(map[string]any)
		eq(t, "truncatedBy", tr["truncatedBy"], any("lines"))
		// The file is out of the workspace's tree (pi's is in the host's
		// temp dir): ls, find, grep and the shell see only the user's files.
		if opsapi.Within(ws.Root(), opsapi.Resolve(ws.Root(), full)) {
			t.Fatalf("full output %q is inside the workspace %q", full, ws.Root())
		}
		put(t, ws, "mine.txt", "3000\n")
		eq(t, "ls", ok(t, tb, "ls", `{}`), "mine.txt")
		eq(t, "find", ok(t, tb, "find", `{"pattern":"**/*"}`), "mine.txt")
		eq(t, "grep", ok(t, tb, "grep", `{"pattern":"^3000$"}`), "mine.txt:1: 3000")
		eq(t, "shell", ok(t, tb, "bash", `{"command":"ls -A"}`), "mine.txt\n")
		// The read tool reaches it.
		page := ok(t, tb, "read", js(map[string]any{"path": full, "offset": 2990}))
		eq(t, "read of the full output", page, "2990\n2991\n2992\n2993\n2994\n2995\n2996\n2997\n2998\n2999\n3000\n")
		page = ok(t, tb, "read", js(map[string]any{"path": full, "limit": 2}))
		eq(t, "read of the full output's start", page, "1\n2\n\n[2999 more lines in file. Use offset=3 to continue.]")
	})
	t.Run("late_output_of_a_background_subshell_is_captured", func(t *testing.T) {
		// Serial, as Exec's case of the same name: timed against the
		// idle grace.
		tb := tools.New(s.serial(t), tools.Options{})
		t.Cleanup(func() { _ = tb.Close() })
		eq(t, "text", ok(t, tb, "bash", `{"command":"(while kill -0 $$ 2>/dev/null; do :; done; echo late) & echo early"}`), "early\nlate\n")
	})
	t.Run("UTF8_euro_and_invalid_bytes_decode_as_TextDecoder", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", ok(t, tb, "bash", `{"command":"printf '\\342\\202\\254 \\377!'"}`), "€ \ufffd!")
	})
	t.Run("abort_is_Command_aborted_with_the_output_so_far", func(t *testing.T) {
		// Cancel once an update shows the output, so the output provably
		// reached the tool before the abort.
		_, tb := s.toolsFor(t, tools.Options{})
		ctx, cancel := context.WithCancel(ctxOf(t))
		defer cancel()
		var once sync.Once
		r := tb.Call(ctx, "bash", json.RawMessage(`{"command":"echo before; sleep 30"}`), func(u tools.Result) {
			if strings.Contains(textOf(u), "before") {
				once.Do(cancel)
			}
		})
		eq(t, "error", r.IsError, true)
		eq(t, "text", textOf(r), "before\n\n\nCommand aborted")
	})
	t.Run("chatty_output_gives_few_updates", func(t *testing.T) {
		_, tb := s.toolsFor(t, tools.Options{})
		var updates atomic.Int64
		r := tb.Call(ctxOf(t), "bash", json.RawMessage(`{"command":"for i in $(seq 5000); do echo $i; done"}`),
			func(tools.Result) { updates.Add(1) })
		eq(t, "error", r.IsError, false)
		if n := updates.Load(); n < 1 || n >= 25 {
			t.Fatalf("%d updates, want 1..24", n)
		}
	})
}

func (s *suite) toolGrep(t *testing.T) {
	t.Run("single_file_match_line", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "example.txt", "first line\nmatch line\nlast line")
		r := call(t, tb, "grep", `{"pattern":"match","path":"example.txt"}`)
		eq(t, "text", textOf(r), "example.txt:2: match line")
		eq(t, "details", detailsOf(t, r) == nil, true)
	})
	t.Run("limit_1_context_1_shows_context_and_notice", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "context.txt", "before\nmatch one\nafter\nmatch two\nafter two\n")
		got := ok(t, tb, "grep", `{"pattern":"match","path":"context.txt","limit":1,"context":1}`)
		eq(t, "text", got, "context.txt-1- before\ncontext.txt:2: match one\ncontext.txt-3- after\n\n"+
			"[1 matches limit reached. Use limit=2 for more, or refine pattern]")
		lacks(t, "text", got, "match two")
	})
	t.Run("flag_like_pattern_is_searched_as_text_and_script_never_runs", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "pre.sh", "#!/bin/sh\ntouch pre-ran\ncat \"$1\"\n")
		sh(t, ws, "chmod +x pre.sh")
		put(t, ws, "data.txt", "nothing to see\n")
		eq(t, "text", ok(t, tb, "grep", js(map[string]any{"pattern": "--pre=" + path.Join(ws.Root(), "pre.sh"), "path": "."})),
			"No matches found")
		_, err := ws.Stat(ctxOf(t), "pre-ran")
		wantKind(t, err, opsapi.ErrNotExist)
	})
	t.Run("directory_search_shows_relative_paths", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "src/deep/b.txt", "a hit here\n")
		eq(t, "text", ok(t, tb, "grep", `{"pattern":"hit","path":"src"}`), "deep/b.txt:1: a hit here")
	})
	t.Run("no_matches_found", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "a.txt", "x\n")
		eq(t, "text", ok(t, tb, "grep", `{"pattern":"absent"}`), "No matches found")
	})
	t.Run("missing_path_is_Path_not_found", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "grep", `{"pattern":"x","path":"missing"}`), "Path not found: "+path.Join(ws.Root(), "missing"))
	})
	t.Run("long_lines_truncated_to_500_chars_with_notice", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "long.txt", "needle"+strings.Repeat("y", 600)+"\n")
		eq(t, "text", ok(t, tb, "grep", `{"pattern":"needle","path":"long.txt"}`),
			"long.txt:1: needle"+strings.Repeat("y", 494)+"... [truncated]\n\n"+
				"[Some lines truncated to 500 chars. Use read tool to see full lines]")
	})
	t.Run("default_limit_is_100_matches_with_notice", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "many.txt", strings.Repeat("hit\n", 150))
		r := call(t, tb, "grep", `{"pattern":"hit"}`)
		got := textOf(r)
		eq(t, "match lines", strings.Count(got, "many.txt:"), 100)
		if !strings.HasSuffix(got, "many.txt:100: hit\n\n[100 matches limit reached. Use limit=200 for more, or refine pattern]") {
			t.Fatalf("text ends %q", got[max(0, len(got)-120):])
		}
		eq(t, "details.matchLimitReached", detailsOf(t, r)["matchLimitReached"], any(100.0))
	})
	t.Run("ignoreCase_literal_and_glob", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "a.go", "Foo.Bar\n")
		put(t, ws, "b.txt", "foo.bar\n")
		eq(t, "ignoreCase+glob", ok(t, tb, "grep", `{"pattern":"foo.bar","ignoreCase":true,"glob":"*.go"}`), "a.go:1: Foo.Bar")
		eq(t, "literal", ok(t, tb, "grep", `{"pattern":"o.b","literal":true}`), "b.txt:1: foo.bar")
	})
	t.Run("invalid_regex_is_an_error", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "a.txt", "x\n")
		fails(t, tb, "grep", `{"pattern":"(unclosed"}`)
	})
}

func (s *suite) toolFind(t *testing.T) {
	t.Run("hidden_files_are_included", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, ".secret/hidden.txt", "")
		put(t, ws, "visible.txt", "")
		got := ok(t, tb, "find", `{"pattern":"*.txt"}`)
		contains(t, "text", got, ".secret/hidden.txt")
		contains(t, "text", got, "visible.txt")
	})
	t.Run("gitignore_is_respected", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, ".gitignore", "ignored.txt\n")
		put(t, ws, "ignored.txt", "")
		put(t, ws, "kept.txt", "")
		eq(t, "text", ok(t, tb, "find", `{"pattern":"*.txt"}`), "kept.txt")
	})
	t.Run("nested_gitignore_is_scoped", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "a/.gitignore", "*.log\n")
		put(t, ws, "a/x.log", "")
		put(t, ws, "b/y.log", "")
		eq(t, "text", ok(t, tb, "find", `{"pattern":"*.log"}`), "b/y.log")
	})
	t.Run("bracket_pattern_is_a_glob_error", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "a.txt", "")
		matches(t, "error", fails(t, tb, "find", `{"pattern":"["}`), `(?i)error parsing glob|fd exited with code 1|fd error`)
	})
	t.Run("help_pattern_is_No_files_found_matching_pattern", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "a.txt", "")
		eq(t, "text", ok(t, tb, "find", `{"pattern":"--help"}`), "No files found matching pattern")
	})
	t.Run("src_**_spec_ts_finds_exactly_the_nested_spec", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "src/foo/bar/example.spec.ts", "")
		put(t, ws, "src/foo/bar/example.ts", "")
		put(t, ws, "test/other.spec.ts", "")
		eq(t, "text", ok(t, tb, "find", `{"pattern":"src/**/*.spec.ts"}`), "src/foo/bar/example.spec.ts")
	})
	t.Run("missing_path_is_Path_not_found", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "find", `{"pattern":"*","path":"missing"}`), "Path not found: "+path.Join(ws.Root(), "missing"))
	})
	t.Run("limit_gives_results_limit_notice", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		for i := range 5 {
			put(t, ws, fmt.Sprintf("f%d.txt", i), "")
		}
		r := call(t, tb, "find", `{"pattern":"*.txt","limit":2}`)
		got := textOf(r)
		eq(t, "result lines", len(strings.Split(strings.SplitN(got, "\n\n", 2)[0], "\n")), 2)
		contains(t, "text", got, "\n\n[2 results limit reached")
		eq(t, "details.resultLimitReached", detailsOf(t, r)["resultLimitReached"], any(2.0))
	})
}

func (s *suite) toolLs(t *testing.T) {
	t.Run("dotfiles_and_directory_slashes", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, ".hidden-file", "")
		must(t, ws.Mkdir(ctxOf(t), ".hidden-dir"))
		put(t, ws, "visible.txt", "")
		got := ok(t, tb, "ls", `{}`)
		for _, want := range []string{".hidden-file", ".hidden-dir/", "visible.txt"} {
			if !strings.Contains("\n"+got+"\n", "\n"+want+"\n") {
				t.Errorf("ls output lacks line %q:\n%s", want, got)
			}
		}
	})
	t.Run("sorted_case_insensitively", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		for _, p := range []string{"b.txt", "A.txt", "c/x", "D.txt"} {
			put(t, ws, "d/"+p, "")
		}
		eq(t, "text", ok(t, tb, "ls", `{"path":"d"}`), "A.txt\nb.txt\nc/\nD.txt")
	})
	t.Run("empty_directory", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		must(t, ws.Mkdir(ctxOf(t), "e"))
		eq(t, "text", ok(t, tb, "ls", `{"path":"e"}`), "(empty directory)")
	})
	t.Run("missing_is_Path_not_found", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		eq(t, "text", fails(t, tb, "ls", `{"path":"missing"}`), "Path not found: "+path.Join(ws.Root(), "missing"))
	})
	t.Run("file_is_Not_a_directory", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		put(t, ws, "f", "")
		eq(t, "text", fails(t, tb, "ls", `{"path":"f"}`), "Not a directory: "+path.Join(ws.Root(), "f"))
	})
	t.Run("limit_gives_entries_limit_notice", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		for _, p := range []string{"a", "b", "c", "d"} {
			put(t, ws, "d/"+p, "")
		}
		eq(t, "text", ok(t, tb, "ls", `{"path":"d","limit":2}`), "a\nb\n\n[2 entries limit reached. Use limit=4 for more]")
	})
	t.Run("default_limit_is_500_entries_with_notice", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		sh(t, ws, "mkdir d && cd d && for i in $(seq 1000 1600); do : > f$i; done")
		r := call(t, tb, "ls", `{"path":"d"}`)
		got := textOf(r)
		if !strings.HasPrefix(got, "f1000\nf1001\n") || !strings.HasSuffix(got, "\nf1499\n\n[500 entries limit reached. Use limit=1000 for more]") {
			t.Fatalf("text = %q...%q", got[:min(20, len(got))], got[max(0, len(got)-80):])
		}
		eq(t, "details.entryLimitReached", detailsOf(t, r)["entryLimitReached"], any(500.0))
	})
	t.Run("links_followed_and_dangling_skipped_as_pi_does", func(t *testing.T) {
		ws, tb := s.toolsFor(t, tools.Options{})
		must(t, ws.Mkdir(ctxOf(t), "d/realdir"))
		put(t, ws, "d/file", "")
		sh(t, ws, "cd d && ln -s realdir dirlink && ln -s file filelink && ln -s nowhere dangling")
		eq(t, "text", ok(t, tb, "ls", `{"path":"d"}`), "dirlink/\nfile\nfilelink\nrealdir/")
	})
}
