package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits shared by every tool (pi's truncate.ts).
const (
	DefaultMaxLines    = 2000
	DefaultMaxBytes    = 50 * 1024
	GrepMaxLineLength  = 500
	truncatedLineTrail = "... [truncated]"
)

// TruncationOptions bound an output; zero fields take the defaults.
type TruncationOptions struct {
	MaxLines int
	MaxBytes int
}

func (o TruncationOptions) withDefaults() TruncationOptions {
	if o.MaxLines <= 0 {
		o.MaxLines = DefaultMaxLines
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return o
}

// TruncationResult mirrors pi's TruncationResult; it is what tools put in
// details.truncation. Byte counts are UTF-8 lengths.
type TruncationResult struct {
	Content               string  `json:"content"`
	Truncated             bool    `json:"truncated"`
	TruncatedBy           *string `json:"truncatedBy"` // "lines", "bytes" or null
	TotalLines            int     `json:"totalLines"`
	TotalBytes            int     `json:"totalBytes"`
	OutputLines           int     `json:"outputLines"`
	OutputBytes           int     `json:"outputBytes"`
	LastLinePartial       bool    `json:"lastLinePartial"`
	FirstLineExceedsLimit bool    `json:"firstLineExceedsLimit"`
	MaxLines              int     `json:"maxLines"`
	MaxBytes              int     `json:"maxBytes"`
}

// By returns TruncatedBy as a string, "" when not truncated.
func (r TruncationResult) By() string {
	if r.TruncatedBy == nil {
		return ""
	}
	return *r.TruncatedBy
}

var (
	byLines = "lines"
	byBytes = "bytes"
)

// splitLines splits content for counting as pi ≥0.75.5 does: "" is no line
// and a single trailing newline does not start another one.
func splitLines(content string) []string {
	if content == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(content, "\n"), "\n")
}

// TruncateHead keeps the beginning of content, whole lines only.
func TruncateHead(content string, opts TruncationOptions) TruncationResult {
	opts = opts.withDefaults()
	lines := splitLines(content)
	r := TruncationResult{
		TotalLines: len(lines), TotalBytes: len(content),
		MaxLines: opts.MaxLines, MaxBytes: opts.MaxBytes,
	}
	if len(lines) <= opts.MaxLines && len(content) <= opts.MaxBytes {
		r.Content, r.OutputLines, r.OutputBytes = content, len(lines), len(content)
		return r
	}
	r.Truncated = true
	if len(lines[0]) > opts.MaxBytes {
		r.TruncatedBy, r.FirstLineExceedsLimit = &byBytes, true
		return r
	}
	n, size := 0, 0
	for n < len(lines) && n < opts.MaxLines {
		cost := len(lines[n])
		if n > 0 {
			cost++
		}
		if size+cost > opts.MaxBytes {
			r.TruncatedBy = &byBytes
			break
		}
		size += cost
		n++
	}
	if r.TruncatedBy == nil {
		r.TruncatedBy = &byLines
	}
	r.Content = strings.Join(lines[:n], "\n")
	r.OutputLines, r.OutputBytes = n, len(r.Content)
	return r
}

// TruncateTail keeps the end of content; only when the last line alone is
// over the byte limit is a line cut, at a UTF-8 boundary.
func TruncateTail(content string, opts TruncationOptions) TruncationResult {
	opts = opts.withDefaults()
	lines := splitLines(content)
	r := TruncationResult{
		TotalLines: len(lines), TotalBytes: len(content),
		MaxLines: opts.MaxLines, MaxBytes: opts.MaxBytes,
	}
	if len(lines) <= opts.MaxLines && len(content) <= opts.MaxBytes {
		r.Content, r.OutputLines, r.OutputBytes = content, len(lines), len(content)
		return r
	}
	r.Truncated = true
	first, size := len(lines), 0
	for first > 0 && len(lines)-first < opts.MaxLines {
		line := lines[first-1]
		cost := len(line)
		if first < len(lines) {
			cost++
		}
		if size+cost > opts.MaxBytes {
			r.TruncatedBy = &byBytes
			if first == len(lines) {
				r.Content = TruncateBytesFromEnd(line, opts.MaxBytes)
				r.OutputLines, r.OutputBytes, r.LastLinePartial = 1, len(r.Content), true
				return r
			}
			break
		}
		size += cost
		first--
	}
	if r.TruncatedBy == nil {
		r.TruncatedBy = &byLines
	}
	r.Content = strings.Join(lines[first:], "\n")
	r.OutputLines, r.OutputBytes = len(lines)-first, len(r.Content)
	return r
}

// TruncateBytesFromEnd keeps at most maxBytes bytes from the end of s,
// moving the cut forward so that no UTF-8 sequence is split.
func TruncateBytesFromEnd(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	start := len(s) - maxBytes
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// TruncateLine shortens line to maxChars UTF-16 code units (pi counts
// JavaScript string length), never splitting a surrogate pair, and appends
// "... [truncated]". It reports whether it cut anything.
func TruncateLine(line string, maxChars int) (string, bool) {
	if maxChars <= 0 {
		maxChars = GrepMaxLineLength
	}
	if len(line) <= maxChars { // bytes >= UTF-16 units, so it fits
		return line, false
	}
	units := 0
	for i, r := range line {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > maxChars {
			if utf16Len(line[i:])+units <= maxChars {
				return line, false
			}
			return line[:i] + truncatedLineTrail, true
		}
		units += w
	}
	return line, false
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// FormatSize renders a byte count as pi does: "512B", "50.0KB", "1.5MB".
func FormatSize(b int) string {
	switch {
	case b < 1024:
		return fmt.Sprintf("%dB", b)
	case b < 1024*1024:
		return fmt.Sprintf("%.1fKB", float64(b)/1024)
	default:
		return fmt.Sprintf("%.1fMB", float64(b)/(1024*1024))
	}
}
