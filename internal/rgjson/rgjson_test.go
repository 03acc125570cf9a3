package rgjson_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// search runs the real ripgrep in dir as a backend would.
func search(t *testing.T, dir string, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	t.Helper()
	rg := testutil.RequireCommand(t, "rg")
	args, err := rgjson.Args(req)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	cmd := exec.Command(rg, append(args, ".")...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res, stopped, perr := rgjson.Collect(out, req, "")
	if stopped || perr != nil {
		// rg may have finished on its own already; either way Wait reaps it.
		_ = cmd.Process.Kill()
	}
	// A non-zero exit (1: no match, 2: error, or killed) is expected here and
	// read from ProcessState below; anything else is a failure of the test.
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	if perr != nil {
		t.Fatal(perr)
	}
	if stopped {
		return res, nil
	}
	return rgjson.Result("search", req.Path, res, cmd.ProcessState.ExitCode(), stderr.String())
}

func lines(res opsapi.SearchResult) string {
	var b []string
	for _, l := range res.Lines {
		b = append(b, fmt.Sprintf("%s:%d:%s:%v", l.Path, l.Line, l.Text, l.Match))
	}
	return strings.Join(b, " | ")
}

func TestCollectRealRipgrep(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("é", 100_000) + " needle"
	files := map[string]string{
		"a.txt":    "before\nneedle one\r\nafter\n",
		"b/long":   long + "\n",
		"c.bin":    "needle \xff\xfe tail\n",
		"esc.txt":  "needle \"quoted\" \\ \t \u2028 \U0001F600\n",
		"many.txt": strings.Repeat("needle\n", 5),
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := search(t, dir, opsapi.SearchRequest{Pattern: "needle", Glob: "a.txt", Context: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(res); got != "a.txt:1:before:false | a.txt:2:needle one:true | a.txt:3:after:false" {
		t.Fatalf("context: %s", got)
	}
	res, err = search(t, dir, opsapi.SearchRequest{Pattern: "needle", Glob: "esc.txt"})
	if err != nil || len(res.Lines) != 1 || res.Lines[0].Text != "needle \"quoted\" \\ \t \u2028 \U0001F600" {
		t.Fatalf("escapes: %q %v", lines(res), err)
	}
	res, err = search(t, dir, opsapi.SearchRequest{Pattern: "needle", Glob: "c.bin", Literal: true})
	if err != nil || len(res.Lines) != 1 || res.Lines[0].Text != "needle \uFFFD\uFFFD tail" {
		t.Fatalf("bytes: %q %v", lines(res), err)
	}
	res, err = search(t, dir, opsapi.SearchRequest{Pattern: "needle", Glob: "long"})
	if err != nil || len(res.Lines) != 1 || len(res.Lines[0].Text) > rgjson.MaxLineBytes || !strings.HasPrefix(res.Lines[0].Text, "éé") {
		t.Fatalf("long line: %d lines, err %v", len(res.Lines), err)
	}
	res, err = search(t, dir, opsapi.SearchRequest{Pattern: "needle", Glob: "many.txt", Limit: 3})
	if err != nil || len(res.Lines) != 3 || !res.LimitReached {
		t.Fatalf("limit: %s %v %v", lines(res), res.LimitReached, err)
	}
	_, err = search(t, dir, opsapi.SearchRequest{Pattern: "(unclosed"})
	if !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("bad regex: %v", err)
	}
	if _, err := rgjson.Args(opsapi.SearchRequest{Pattern: "a\x00"}); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("NUL: %v", err)
	}
}

func TestReplaceInvalidPerMaximalSubpart(t *testing.T) {
	for in, want := range map[string]string{
		"a\xff\xfeb":   "a\uFFFD\uFFFDb",
		"\xe2\x82x":    "\uFFFDx", // one truncated sequence
		"\xe2\x82\xac": "\u20ac",
		"\xed\xa0\x80": "\uFFFD\uFFFD\uFFFD", // a surrogate is three bad bytes
		"\xf0\x9f\x98": "\uFFFD",
		"\xc3\x28":     "\uFFFD(",
	} {
		res, _, err := rgjson.Collect(strings.NewReader(`{"type":"match","data":{"path":{"text":"p"},"lines":{"bytes":"`+
			base64.StdEncoding.EncodeToString([]byte(in))+`"},"line_number":1}}`), opsapi.SearchRequest{}, "")
		if err != nil || len(res.Lines) != 1 || res.Lines[0].Text != want {
			t.Errorf("%q: %+v %v, want %q", in, res.Lines, err, want)
		}
	}
}

func FuzzCollect(f *testing.F) {
	f.Add(`{"type":"match","data":{"path":{"text":"./a"},"lines":{"bytes":"/w=="},"line_number":3,"x":[1,{"y":null},"\u00e9"]}}`)
	f.Add(`{"type":"context","data":{"path":{"text":"a"},"lines":{"text":"\ud83d\ude00\ud800"},"line_number":1}}` + "\n")
	f.Fuzz(func(t *testing.T, in string) {
		res, _, _ := rgjson.Collect(strings.NewReader(in), opsapi.SearchRequest{Limit: 2}, "")
		matches := 0
		for _, l := range res.Lines {
			if l.Match {
				matches++
			}
			if len(l.Text) > rgjson.MaxLineBytes || !utf8.ValidString(l.Text) {
				t.Fatalf("line text of %d bytes, valid UTF-8 %v", len(l.Text), utf8.ValidString(l.Text))
			}
		}
		if matches > 2 {
			t.Fatalf("%d matches for limit 2", matches)
		}
	})
}
