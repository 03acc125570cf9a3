package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// memSpill is a spill target in memory, written through the same pipe
// the bash tool uses.
type memSpill struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	opened int
	path   string
}

func (m *memSpill) open() (string, io.WriteCloser, error) {
	m.mu.Lock()
	m.opened++
	m.mu.Unlock()
	return m.path, startPipeSpill(context.Background(), time.Minute, func(_ context.Context, r io.Reader) error {
		_, err := io.Copy(&m.buf, r)
		return err
	}), nil
}

func newMemAccumulator(t testing.TB) (*OutputAccumulator, *memSpill) {
	m := &memSpill{path: "/ws/.broker/output/bash-test.log"}
	a := NewOutputAccumulator(TruncationOptions{}, m.open, func(err error) { t.Errorf("spill: %v", err) })
	return a, m
}

func decodeChunks(chunks ...string) string {
	var d utf8StreamDecoder
	d.reset()
	var out []byte
	for _, c := range chunks {
		out = d.decode(out, []byte(c))
	}
	return string(d.flush(out))
}

func TestAccumulatorDecodeSplitRune(t *testing.T) {
	euro := "€" // e2 82 ac
	cases := [][]string{
		{euro[:1], euro[1:2], euro[2:]},
		{"a" + euro[:2], euro[2:] + "b"},
		{"x" + euro[:1], "", euro[1:]},
	}
	for _, chunks := range cases {
		got := decodeChunks(chunks...)
		want := strings.Join(chunks, "")
		if got != want {
			t.Errorf("decode(%q) = %q, want %q", chunks, got, want)
		}
	}
	// 4-byte rune split every way.
	emoji := "😀"
	for i := 1; i < len(emoji); i++ {
		for j := i; j < len(emoji); j++ {
			if got := decodeChunks(emoji[:i], emoji[i:j], emoji[j:]); got != emoji {
				t.Errorf("split %d,%d: %q", i, j, got)
			}
		}
	}
}

func TestAccumulatorDecodeInvalid(t *testing.T) {
	const R = "\uFFFD"
	cases := []struct{ in, want string }{
		{"\xff", R},
		{"a\xffb", "a" + R + "b"},
		{"\x80\x80", R + R},                 // each lone continuation byte
		{"\xe2\x82A", R + "A"},              // one maximal subpart, then A again
		{"\xe2\x82", R},                     // unfinished at the end of the stream
		{"\xed\xa0\x80", R + R + R},         // surrogate: ED then A0 out of range
		{"\xc0\xaf", R + R},                 // overlong
		{"\xf4\x90\x80\x80", R + R + R + R}, // above U+10FFFF
		{"\xf0\x9f\x98", R},
		{"\xf0\x9f\x98\xf0\x9f\x98\x80", R + "😀"},
		{"\x00ok", "\x00ok"},
	}
	for _, c := range cases {
		if got := decodeChunks(c.in); got != c.want {
			t.Errorf("decode(%q) = %q, want %q", c.in, got, c.want)
		}
		// Byte by byte must give the same.
		var parts []string
		for i := range len(c.in) {
			parts = append(parts, c.in[i:i+1])
		}
		if got := decodeChunks(parts...); got != c.want {
			t.Errorf("decode(%q) bytewise = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAccumulatorDecodeStreamInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\n", "é", "€", "😀", "\xff", "\x80", "\xe2\x82", "\xf0\x9f", "\xed\xa0\x80"}
	for range 500 {
		var sb strings.Builder
		for range rng.IntN(60) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		in := sb.String()
		whole := decodeChunks(in)
		if !utf8.ValidString(whole) {
			t.Fatalf("decode(%q) is not valid UTF-8: %q", in, whole)
		}
		var chunks []string
		for rest := in; rest != ""; {
			n := min(len(rest), 1+rng.IntN(5))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		if got := decodeChunks(chunks...); got != whole {
			t.Fatalf("chunked decode of %q = %q, whole = %q", in, got, whole)
		}
	}
}

func TestAccumulatorDecodeValidPassesThrough(t *testing.T) {
	s := "plain ascii, é, €, 😀, \uFFFD, \U0010FFFF"
	if got := decodeChunks(s); got != s {
		t.Errorf("got %q", got)
	}
}

func TestAccumulatorCounters(t *testing.T) {
	cases := []struct {
		in    string
		lines int
	}{
		{"", 0},
		{"a", 1},
		{"a\n", 1},
		{"a\nb\n", 2},
		{"a\nb", 2},
		{"\n", 1},
		{"\n\n", 2},
	}
	for _, c := range cases {
		a, m := newMemAccumulator(t)
		_, _ = io.WriteString(a, c.in)
		s := a.Finish()
		tr := s.Truncation
		if tr.TotalLines != c.lines || tr.TotalBytes != len(c.in) || tr.Truncated || s.FullOutputPath != "" {
			t.Errorf("%q: lines %d bytes %d truncated %v path %q; want %d lines", c.in, tr.TotalLines, tr.TotalBytes, tr.Truncated, s.FullOutputPath, c.lines)
		}
		if tr.Content != c.in {
			t.Errorf("%q: content %q", c.in, tr.Content)
		}
		if m.opened != 0 {
			t.Errorf("%q: spill opened for small output", c.in)
		}
	}
	// The last line's size, whether or not the output ends with a newline.
	for _, tc := range []struct {
		chunks []string
		last   int64
	}{
		{[]string{"abc\nde"}, 2},
		{[]string{"abc\nde\n"}, 2},
		{[]string{"ab", "c\n"}, 3},
		{[]string{"ab", "c", "\nxy", "z\n"}, 3},
		{[]string{"x\n\n"}, 0},
		{[]string{"€", "€\n"}, 6},
	} {
		a, _ := newMemAccumulator(t)
		for _, c := range tc.chunks {
			_, _ = io.WriteString(a, c)
		}
		if got := a.Finish().LastLineBytes; got != tc.last {
			t.Errorf("%q: last line %d bytes, want %d", tc.chunks, got, tc.last)
		}
	}

	// Invalid bytes count as their decoded (U+FFFD) size, raw as raw.
	a, _ := newMemAccumulator(t)
	_, _ = a.Write([]byte("\xff\xff"))
	s := a.Finish()
	if s.Truncation.TotalBytes != 6 || s.RawBytes != 2 {
		t.Errorf("decoded %d raw %d, want 6 and 2", s.Truncation.TotalBytes, s.RawBytes)
	}
}

func seqLines(from, to int) string {
	var sb strings.Builder
	for i := from; i <= to; i++ {
		sb.WriteString(strconv.Itoa(i))
		sb.WriteByte('\n')
	}
	return sb.String()
}

func TestAccumulatorSeq3000(t *testing.T) {
	a, m := newMemAccumulator(t)
	full := seqLines(1, 3000)
	for _, line := range strings.SplitAfter(full, "\n") {
		_, _ = io.WriteString(a, line)
	}
	s := a.Finish()
	tr := s.Truncation
	if !tr.Truncated || tr.By() != "lines" || tr.TotalLines != 3000 || tr.OutputLines != 2000 {
		t.Fatalf("truncation = %+v", tr)
	}
	if want := strings.TrimSuffix(seqLines(1001, 3000), "\n"); tr.Content != want {
		t.Errorf("content starts %q, ends %q", tr.Content[:10], tr.Content[len(tr.Content)-10:])
	}
	if s.FullOutputPath != m.path || m.opened != 1 {
		t.Errorf("path %q, opened %d", s.FullOutputPath, m.opened)
	}
	if m.buf.String() != full {
		t.Errorf("spill holds %d bytes, want %d", m.buf.Len(), len(full))
	}
}

func TestAccumulatorMillionLines(t *testing.T) {
	a, m := newMemAccumulator(t)
	const n = 1_000_000
	var chunk strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&chunk, "line %d\n", i)
		if chunk.Len() > 4000 || i == n {
			_, _ = io.WriteString(a, chunk.String())
			chunk.Reset()
		}
	}
	s := a.Finish()
	tr := s.Truncation
	if tr.TotalLines != n || tr.OutputLines != 2000 || tr.By() != "lines" {
		t.Fatalf("lines %d/%d by %q", tr.OutputLines, tr.TotalLines, tr.By())
	}
	if !strings.HasPrefix(tr.Content, fmt.Sprintf("line %d\n", n-1999)) || !strings.HasSuffix(tr.Content, fmt.Sprintf("\nline %d", n)) {
		t.Errorf("content = %q...%q", tr.Content[:20], tr.Content[len(tr.Content)-20:])
	}
	if int64(m.buf.Len()) != s.RawBytes || tr.TotalBytes != m.buf.Len() {
		t.Errorf("spill %d bytes, raw %d, decoded %d", m.buf.Len(), s.RawBytes, tr.TotalBytes)
	}
	if !bytes.HasPrefix(m.buf.Bytes(), []byte("line 1\nline 2\n")) || !bytes.HasSuffix(m.buf.Bytes(), []byte("line 1000000\n")) {
		t.Error("spill file is not the whole output")
	}
}

func TestAccumulatorHugeLine(t *testing.T) {
	for _, one := range []bool{true, false} {
		t.Run(fmt.Sprintf("oneWrite=%v", one), func(t *testing.T) {
			a, m := newMemAccumulator(t)
			line := strings.Repeat("0123456789", 1_000_000) // 10 MB, no newline
			if one {
				_, _ = io.WriteString(a, line)
			} else {
				for rest := line; rest != ""; {
					n := min(len(rest), 32*1024+7)
					_, _ = io.WriteString(a, rest[:n])
					rest = rest[n:]
				}
			}
			s := a.Finish()
			tr := s.Truncation
			if !tr.LastLinePartial || tr.By() != "bytes" || tr.TotalLines != 1 || tr.TotalBytes != len(line) {
				t.Fatalf("truncation = %+v", withoutContent(tr))
			}
			if tr.Content != line[len(line)-DefaultMaxBytes:] {
				t.Errorf("content is not the line's last 50 KiB")
			}
			if m.buf.String() != line {
				t.Errorf("spill holds %d bytes", m.buf.Len())
			}
		})
	}
}

func withoutContent(tr TruncationResult) TruncationResult {
	tr.Content = fmt.Sprintf("<%d bytes>", len(tr.Content))
	return tr
}

// After the rolling tail is trimmed mid-line, the partial first line is
// dropped, unless it is all there is.
func TestAccumulatorPartialFirstLineDropped(t *testing.T) {
	a, _ := newMemAccumulator(t)
	_, _ = io.WriteString(a, strings.Repeat("x", 300_000)+"\nend\n")
	tr := a.Finish().Truncation
	if tr.Content != "end\n" || tr.TotalLines != 2 || tr.OutputLines != 1 || tr.By() != "bytes" || !tr.Truncated {
		t.Errorf("truncation = %+v", withoutContent(tr))
	}

	a, _ = newMemAccumulator(t)
	_, _ = io.WriteString(a, strings.Repeat("y", 300_000)+"\n")
	tr = a.Finish().Truncation
	if !tr.LastLinePartial || tr.Content != strings.Repeat("y", DefaultMaxBytes) || tr.TotalLines != 1 {
		t.Errorf("truncation = %+v", withoutContent(tr))
	}
}

// The tail must agree with truncating the whole text for outputs whose
// kept window lies inside the rolling tail, however they are chunked.
func TestAccumulatorMatchesTruncateTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"a", "bb", "é", "€€", "😀", " ", "\t", strings.Repeat("z", 700)}
	for iter := range 30 {
		var sb strings.Builder
		target := rng.IntN(600_000)
		for sb.Len() < target {
			for range rng.IntN(20) {
				sb.WriteString(words[rng.IntN(len(words))])
			}
			sb.WriteByte('\n')
		}
		if rng.IntN(2) == 0 {
			sb.WriteString("unterminated")
		}
		full := sb.String()
		a, m := newMemAccumulator(t)
		for rest := full; rest != ""; {
			n := min(len(rest), 1+rng.IntN(9000))
			_, _ = io.WriteString(a, rest[:n])
			rest = rest[n:]
		}
		got := a.Finish()
		want := TruncateTail(full, TruncationOptions{})
		g := got.Truncation
		if g.Content != want.Content || g.TotalLines != want.TotalLines || g.TotalBytes != want.TotalBytes ||
			g.OutputLines != want.OutputLines || g.Truncated != want.Truncated || g.By() != want.By() {
			t.Fatalf("iter %d (%d bytes): got %+v, want %+v", iter, len(full), withoutContent(g), withoutContent(want))
		}
		if want.Truncated != (got.FullOutputPath != "") {
			t.Errorf("iter %d: truncated %v but path %q", iter, want.Truncated, got.FullOutputPath)
		}
		if want.Truncated && m.buf.String() != full {
			t.Errorf("iter %d: spill differs from the output", iter)
		}
	}
}

func TestAccumulatorSpillHoldsRawBytes(t *testing.T) {
	a, m := newMemAccumulator(t)
	rng := rand.New(rand.NewPCG(5, 6))
	raw := make([]byte, 300_000)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	for rest := raw; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(5000))
		_, _ = a.Write(rest[:n])
		rest = rest[n:]
	}
	s := a.Finish()
	if !bytes.Equal(m.buf.Bytes(), raw) {
		t.Errorf("spill holds %d bytes, want the %d raw bytes", m.buf.Len(), len(raw))
	}
	if !utf8.ValidString(s.Truncation.Content) {
		t.Error("snapshot content is not valid UTF-8")
	}
}

// The spill also starts on raw bytes alone, before they decode.
func TestAccumulatorSpillOnLinesAlone(t *testing.T) {
	a, m := newMemAccumulator(t)
	_, _ = io.WriteString(a, strings.Repeat("\n", 2001))
	s := a.Finish()
	if s.FullOutputPath == "" || m.buf.Len() != 2001 || s.Truncation.By() != "lines" {
		t.Errorf("path %q, spill %d bytes, by %q", s.FullOutputPath, m.buf.Len(), s.Truncation.By())
	}
}

func TestAccumulatorLateWritesIgnored(t *testing.T) {
	a, m := newMemAccumulator(t)
	_, _ = io.WriteString(a, seqLines(1, 3000))
	first := a.Finish()
	n, err := io.WriteString(a, "late\n")
	if n != 5 || err != nil {
		t.Errorf("late write = %d, %v", n, err)
	}
	second := a.Finish()
	if first.Truncation != second.Truncation || a.Snapshot().Truncation.TotalLines != 3000 {
		t.Error("a late write changed the result")
	}
	if strings.Contains(m.buf.String(), "late") {
		t.Error("a late write reached the spill file")
	}
}

func TestAccumulatorNoSpillTarget(t *testing.T) {
	a := NewOutputAccumulator(TruncationOptions{}, nil, nil)
	_, _ = io.WriteString(a, seqLines(1, 3000))
	s := a.Finish()
	if s.FullOutputPath != "" || s.Truncation.TotalLines != 3000 || s.Truncation.OutputLines != 2000 {
		t.Errorf("snapshot = %+v path %q", withoutContent(s.Truncation), s.FullOutputPath)
	}
}

func TestAccumulatorSpillOpenFails(t *testing.T) {
	var reported []error
	a := NewOutputAccumulator(TruncationOptions{}, func() (string, io.WriteCloser, error) {
		return "", nil, errors.New("disk on fire")
	}, func(err error) { reported = append(reported, err) })
	_, _ = io.WriteString(a, seqLines(1, 3000))
	s := a.Finish()
	if s.FullOutputPath != "" || s.Truncation.OutputLines != 2000 {
		t.Errorf("path %q, lines %d", s.FullOutputPath, s.Truncation.OutputLines)
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "disk on fire") {
		t.Errorf("reported %v", reported)
	}
}

func TestAccumulatorSpillWriteFails(t *testing.T) {
	var reported []error
	var got bytes.Buffer
	a := NewOutputAccumulator(TruncationOptions{}, func() (string, io.WriteCloser, error) {
		return "/x.log", startPipeSpill(context.Background(), time.Minute, func(_ context.Context, r io.Reader) error {
			_, err := io.CopyN(&got, r, 60_000)
			if err != nil {
				return err
			}
			return errors.New("quota exceeded")
		}), nil
	}, func(err error) { reported = append(reported, err) })
	for i := range 100 {
		_, _ = io.WriteString(a, seqLines(i*1000, i*1000+999))
	}
	s := a.Finish()
	if s.FullOutputPath != "" || s.Truncation.OutputLines != 2000 {
		t.Errorf("path %q, lines %d", s.FullOutputPath, s.Truncation.OutputLines)
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "quota exceeded") {
		t.Errorf("reported %v", reported)
	}
}

// Whatever a command prints, the accumulator's memory stays bounded: the
// rolling tail, one decode buffer and the pre-spill chunks.
func TestAccumulatorBoundedMemory(t *testing.T) {
	flood := 256 << 20 // 256 MiB; the bound does not depend on the size
	if testing.Short() {
		flood = 32 << 20
	}
	for _, tc := range []struct {
		name  string
		chunk []byte
	}{
		{"lines", bytes.Repeat([]byte("y\n"), 16*1024)},
		{"oneLine", bytes.Repeat([]byte("z"), 1<<20)},
		{"invalid", bytes.Repeat([]byte{0xff}, 64*1024)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spilled int64
			a := NewOutputAccumulator(TruncationOptions{}, func() (string, io.WriteCloser, error) {
				return "/x.log", startPipeSpill(context.Background(), time.Minute, func(_ context.Context, r io.Reader) error {
					n, err := io.Copy(io.Discard, r)
					spilled = n
					return err
				}), nil
			}, func(err error) { t.Error(err) })

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for written := 0; written < flood; written += len(tc.chunk) {
				_, _ = a.Write(tc.chunk)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 8<<20 {
				t.Errorf("heap grew by %d bytes after a %d-byte flood", grown, flood)
			}
			if c := cap(a.tail); c > 1<<20 {
				t.Errorf("tail capacity %d", c)
			}
			// In steady state a write allocates nothing.
			if allocs := testing.AllocsPerRun(50, func() { _, _ = a.Write(tc.chunk) }); allocs > 0 {
				t.Errorf("%.1f allocations per write", allocs)
			}
			s := a.Finish()
			if spilled != s.RawBytes || s.FullOutputPath == "" {
				t.Errorf("spilled %d of %d bytes, path %q", spilled, s.RawBytes, s.FullOutputPath)
			}
			if len(s.Truncation.Content) > DefaultMaxBytes {
				t.Errorf("content %d bytes", len(s.Truncation.Content))
			}
		})
	}
}

// A spill target that stops reading costs the file, not the command.
func TestAccumulatorSpillStalls(t *testing.T) {
	for _, honoursCtx := range []bool{true, false} {
		t.Run(fmt.Sprintf("honoursCtx=%v", honoursCtx), func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			var reported []error
			a := NewOutputAccumulator(TruncationOptions{}, func() (string, io.WriteCloser, error) {
				return "/x.log", startPipeSpill(context.Background(), 50*time.Millisecond, func(ctx context.Context, r io.Reader) error {
					if honoursCtx {
						<-ctx.Done()
						return ctx.Err()
					}
					<-release // hangs until the test ends
					return nil
				}), nil
			}, func(err error) { reported = append(reported, err) })
			done := make(chan OutputSnapshot)
			go func() {
				_, _ = io.WriteString(a, seqLines(1, 30000))
				done <- a.Finish()
			}()
			select {
			case s := <-done:
				if s.FullOutputPath != "" || s.Truncation.TotalLines != 30000 {
					t.Errorf("path %q, lines %d", s.FullOutputPath, s.Truncation.TotalLines)
				}
				if len(reported) != 1 || !errors.Is(reported[0], errSpillStalled) {
					t.Errorf("reported %v", reported)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a stalled spill hung the accumulator")
			}
		})
	}
}
