package tools

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTruncate checks the invariants every caller of TruncateHead and
// TruncateTail relies on, and that read's streaming collector agrees with
// TruncateHead.
func FuzzTruncate(f *testing.F) {
	f.Add("", 1, 1)
	f.Add("a\nb\nc\n", 2, 100)
	f.Add("héllo\nwörld", 5, 3)
	f.Add("€€€€", 10, 4)
	f.Add("\n\n\n", 1, 1)
	f.Add("line one\r\nline two\r\n", 1, 9)
	f.Add("x\xffy\nz", 3, 2)
	f.Fuzz(func(t *testing.T, content string, maxLines, maxBytes int) {
		opts := TruncationOptions{MaxLines: 1 + abs(maxLines)%200, MaxBytes: 1 + abs(maxBytes)%8192}
		valid := utf8.ValidString(content)
		trimmed := strings.TrimSuffix(content, "\n")

		h := TruncateHead(content, opts)
		if !strings.HasPrefix(content, h.Content) {
			t.Fatalf("head %q is not a prefix of %q", h.Content, content)
		}
		checkCommon(t, "head", h, opts, valid)
		if !h.Truncated && h.Content != content {
			t.Fatalf("head changed untruncated content")
		}

		tl := TruncateTail(content, opts)
		if !strings.HasSuffix(content, tl.Content) && !strings.HasSuffix(trimmed, tl.Content) {
			t.Fatalf("tail %q is not a suffix of %q", tl.Content, content)
		}
		checkCommon(t, "tail", tl, opts, valid)

		if valid {
			c := newHeadCollector(opts)
			for _, l := range strings.Split(content, "\n") {
				c.add([]byte(l), len(l), true)
			}
			if got := c.result(); !equalTruncation(got, h) {
				t.Fatalf("collector %+v != TruncateHead %+v", got, h)
			}
		}
	})
}

func checkCommon(t *testing.T, which string, r TruncationResult, opts TruncationOptions, valid bool) {
	t.Helper()
	if r.OutputBytes != len(r.Content) {
		t.Fatalf("%s: OutputBytes %d != len %d", which, r.OutputBytes, len(r.Content))
	}
	if r.Truncated && len(r.Content) > opts.MaxBytes {
		t.Fatalf("%s: %d bytes over max %d", which, len(r.Content), opts.MaxBytes)
	}
	if n := len(splitLines(r.Content)); r.Truncated && n > opts.MaxLines {
		t.Fatalf("%s: %d lines over max %d", which, n, opts.MaxLines)
	}
	if valid && !utf8.ValidString(r.Content) {
		t.Fatalf("%s: invalid UTF-8 output %q", which, r.Content)
	}
	if r.Truncated != (r.TruncatedBy != nil) {
		t.Fatalf("%s: truncated %v but by %v", which, r.Truncated, r.By())
	}
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // math.MinInt
			return 0
		}
		return -n
	}
	return n
}
