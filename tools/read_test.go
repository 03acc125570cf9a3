package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/image/bmp"

	"github.com/wsbroker/wsbroker/opsapi"
)

func numberedLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "line %d", i)
	}
	return b.String()
}

func TestReadText(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("small.txt", "hello\r\nworld\n")
	r := call(t, tb, "read", `{"path":"small.txt"}`)
	wantText(t, r, false, "hello\r\nworld\n")
	if r.Details != nil {
		t.Errorf("details = %#v, want none", r.Details)
	}
	if n := countCalls(f, "Access /w/small.txt"); n != 1 {
		t.Errorf("%d Access round trips for an existing file, want 1", n)
	}

	f.addFile("hundred.txt", numberedLines(100))
	got := text(t, call(t, tb, "read", `{"path":"hundred.txt","offset":51}`))
	if !strings.HasPrefix(got, "line 51\n") || !strings.HasSuffix(got, "\nline 100") || strings.Contains(got, "line 50\n") {
		t.Errorf("offset 51: %q", got)
	}
	wantText(t, call(t, tb, "read", `{"path":"hundred.txt","limit":10}`), false,
		numberedLines(10)+"\n\n[90 more lines in file. Use offset=11 to continue.]")
	got = text(t, call(t, tb, "read", `{"path":"hundred.txt","offset":41,"limit":20}`))
	if !strings.HasPrefix(got, "line 41\n") || !strings.HasSuffix(got, "line 60\n\n[40 more lines in file. Use offset=61 to continue.]") {
		t.Errorf("offset 41 limit 20: %q", got)
	}
	// A limit that reaches the end adds no notice.
	wantText(t, call(t, tb, "read", `{"path":"hundred.txt","offset":100,"limit":5}`), false, "line 100")

	f.addFile("three.txt", "a\nb\nc")
	wantText(t, call(t, tb, "read", `{"path":"three.txt","offset":100}`), true,
		"Offset 100 is beyond end of file (3 lines total)")
	wantText(t, call(t, tb, "read", `{"path":"three.txt","offset":1e300}`), true,
		"Offset 1e+300 is beyond end of file (3 lines total)")
	// The trailing newline still counts as a line for the total.
	f.addFile("three-nl.txt", "a\nb\nc\n")
	wantText(t, call(t, tb, "read", `{"path":"three-nl.txt","offset":5}`), true,
		"Offset 5 is beyond end of file (4 lines total)")
	f.addFile("empty.txt", "")
	wantText(t, call(t, tb, "read", `{"path":"empty.txt"}`), false, "")
}

func TestReadTruncatedByLines(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("long.txt", numberedLines(2500)+"\n")
	r := call(t, tb, "read", `{"path":"long.txt"}`)
	wantText(t, r, false, numberedLines(2000)+"\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]")
	raw, _ := json.Marshal(r.Details)
	var d struct{ Truncation TruncationResult }
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if !d.Truncation.Truncated || d.Truncation.By() != "lines" || d.Truncation.TotalLines != 2500 || d.Truncation.OutputLines != 2000 {
		t.Errorf("truncation details = %+v", d.Truncation)
	}
	got := text(t, call(t, tb, "read", `{"path":"long.txt","offset":2001}`))
	if !strings.HasPrefix(got, "line 2001\n") || !strings.HasSuffix(got, "line 2500\n") {
		t.Errorf("continuation: %q...%q", got[:20], got[len(got)-20:])
	}
}

func TestReadTruncatedByBytes(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	var lines []string
	for i := 1; i <= 500; i++ {
		lines = append(lines, fmt.Sprintf("%03d %s", i, strings.Repeat("x", 206)))
	}
	f.addFile("wide.txt", strings.Join(lines, "\n"))
	// 210 bytes + newline per line: 243 lines fit in 51200 bytes.
	n := (DefaultMaxBytes + 1) / 211
	want := strings.Join(lines[:n], "\n") + fmt.Sprintf("\n\n[Showing lines 1-%d of 500 (50.0KB limit). Use offset=%d to continue.]", n, n+1)
	wantText(t, call(t, tb, "read", `{"path":"wide.txt"}`), false, want)
}

func TestReadFirstLineTooLong(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("big.txt", "short\n"+strings.Repeat("y", 60*1024)+"\nafter\n")
	r := call(t, tb, "read", `{"path":"@big.txt","offset":2}`)
	wantText(t, r, false, "[Line 2 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '2p' @big.txt | head -c 51200]")
	if r.Details == nil {
		t.Error("first-line case must carry details.truncation")
	}
	got := text(t, call(t, tb, "read", `{"path":"big.txt"}`))
	if got != "short\n\n[Showing lines 1-1 of 4 (50.0KB limit). Use offset=2 to continue.]" {
		t.Errorf("got %q", got)
	}
}

func TestReadErrors(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	wantText(t, call(t, tb, "read", `{"path":"missing.txt"}`), true,
		"ENOENT: no such file or directory, access '/w/missing.txt'")
	f.addFile("secret", "s")
	f.setMode("secret", 0o200)
	wantText(t, call(t, tb, "read", `{"path":"secret"}`), true,
		"EACCES: permission denied, access '/w/secret'")
	f.addDir("dir")
	wantText(t, call(t, tb, "read", `{"path":"dir"}`), true,
		"EISDIR: illegal operation on a directory, read")
	wantText(t, call(t, tb, "read", `{"path":"/etc/passwd"}`), true,
		"EACCES: permission denied, access '/etc/passwd'")
	f.addFile("flaky", "x")
	f.failOn("Open", "flaky", opsapi.E("fake.Open", "/w/flaky", opsapi.ErrUnavailable, fmt.Errorf("backend gone")))
	wantText(t, call(t, tb, "read", `{"path":"flaky"}`), true, "fake.Open /w/flaky: backend gone")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := tb.Call(ctx, "read", json.RawMessage(`{"path":"secret"}`), nil)
	wantText(t, r, true, "Operation aborted")
}

// streamWorkspace serves one huge generated file without holding it.
type streamWorkspace struct {
	*fakeWorkspace
	size int64
}

func (s streamWorkspace) Access(context.Context, string, opsapi.AccessMode) error { return nil }
func (s streamWorkspace) Open(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(io.LimitReader(&lineGen{}, s.size)), nil
}

// lineGen yields "0123456789...\n" lines of 100 bytes forever.
type lineGen struct{ pos int }

func (g *lineGen) Read(p []byte) (int, error) {
	for i := range p {
		if g.pos%100 == 99 {
			p[i] = '\n'
		} else {
			p[i] = byte('0' + g.pos%10)
		}
		g.pos++
	}
	return len(p), nil
}

func TestReadStreamsLargeFileInBoundedMemory(t *testing.T) {
	const size = 100 << 20
	ws := streamWorkspace{newFakeWorkspace(t), size}
	tb := newTestToolbox(t, ws)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := call(t, tb, "read", `{"path":"huge.log"}`)
	runtime.ReadMemStats(&after)
	got := text(t, r)
	total := size/100 + 1                // the final newline starts an empty last line
	shown := (DefaultMaxBytes + 1) / 100 // 99 characters and a newline each
	wantNotice := fmt.Sprintf("\n\n[Showing lines 1-%d of %d (50.0KB limit). Use offset=%d to continue.]", shown, total, shown+1)
	if !strings.HasSuffix(got, wantNotice) {
		t.Errorf("notice: %q", got[len(got)-120:])
	}
	// Everything allocated during the call, not just what is live: a
	// read that held the file would allocate at least its 100 MiB.
	// The bound is loose because TotalAlloc is process-wide: goroutines
	// other tests left behind may allocate meanwhile.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB while reading %d MiB", alloc>>10, size>>20)
	if alloc > 48<<20 {
		t.Errorf("read allocated %d MiB for a %d MiB file", alloc>>20, size>>20)
	}
	// Offsets near the end work without holding the start.
	got = text(t, call(t, tb, "read", fmt.Sprintf(`{"path":"huge.log","offset":%d}`, total-1)))
	if got != "012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678\n" {
		t.Errorf("last line: %q", got)
	}
}

func TestHeadCollectorMatchesTruncateHead(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "bc", "é", "", "\r", "xyz", "\xff"}
	for iter := range 5000 {
		var lines []string
		for range rng.IntN(12) {
			var b strings.Builder
			for range rng.IntN(5) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			lines = append(lines, b.String())
		}
		opts := TruncationOptions{MaxLines: 1 + rng.IntN(8), MaxBytes: 1 + rng.IntN(30)}
		c := newHeadCollector(opts)
		for _, l := range lines {
			c.add([]byte(l), len(l), true)
		}
		got := c.result()
		decoded := make([]string, len(lines))
		for i, l := range lines {
			decoded[i] = decodeLine([]byte(l))
		}
		want := TruncateHead(strings.Join(decoded, "\n"), opts)
		if !equalTruncation(got, want) {
			t.Fatalf("iter %d lines %q opts %+v\n got %+v\nwant %+v", iter, lines, opts, got, want)
		}
	}
}

func equalTruncation(a, b TruncationResult) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadImages(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)

	small := pngBytes(t, 4, 3)
	f.addFile("image.txt", string(small)) // content decides, not the name
	r := call(t, tb, "read", `{"path":"image.txt"}`)
	if len(r.Content) != 2 || r.IsError {
		t.Fatalf("png result: %+v", r)
	}
	wantText(t, r, false, "Read image file [image/png]")
	if img := r.Content[1]; img.Type != "image" || img.MimeType != "image/png" || img.Data != base64.StdEncoding.EncodeToString(small) {
		t.Errorf("image block: %+v", img)
	}

	f.addFile("not-an-image.png", "just text")
	wantText(t, call(t, tb, "read", `{"path":"not-an-image.png"}`), false, "just text")
	f.addFile("bm.txt", "BM is how this text starts\n")
	wantText(t, call(t, tb, "read", `{"path":"bm.txt"}`), false, "BM is how this text starts\n")

	var bmpBuf bytes.Buffer
	if err := bmp.Encode(&bmpBuf, image.NewRGBA(image.Rect(0, 0, 5, 5))); err != nil {
		t.Fatal(err)
	}
	f.addFile("pic.bmp", bmpBuf.String())
	r = call(t, tb, "read", `{"path":"pic.bmp"}`)
	wantText(t, r, false, "Read image file [image/png]\n[Image converted from image/bmp to image/png.]")
	if len(r.Content) != 2 || r.Content[1].MimeType != "image/png" {
		t.Fatalf("bmp result: %+v", r)
	}
	data, _ := base64.StdEncoding.DecodeString(r.Content[1].Data)
	if cfg, err := png.DecodeConfig(bytes.NewReader(data)); err != nil || cfg.Width != 5 {
		t.Errorf("converted bmp is not a 5px png: %v %+v", err, cfg)
	}

	broken := append([]byte(nil), bmpBuf.Bytes()[:40]...)
	f.addFile("broken.bmp", string(broken))
	wantText(t, call(t, tb, "read", `{"path":"broken.bmp"}`), false,
		"Read image file [image/bmp]\n[Image omitted: could not be converted to a supported inline image format.]")

	f.addFile("corrupt.png", string(small[:20]))
	wantText(t, call(t, tb, "read", `{"path":"corrupt.png"}`), false,
		"Read image file [image/png]\n[Image omitted: could not be resized below the inline image size limit.]")

	f.addFile("gif.bin", "GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
	wantText(t, call(t, tb, "read", `{"path":"gif.bin"}`), false, "Read image file [image/gif]")
}

func TestReadResizesLargeImage(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("wide.png", string(pngBytes(t, 3000, 1000)))
	r := call(t, tb, "read", `{"path":"wide.png"}`)
	wantText(t, r, false, "Read image file [image/png]\n[Image: original 3000x1000, displayed at 2000x667. Multiply coordinates by 1.50 to map to original image.]")
	if len(r.Content) != 2 {
		t.Fatalf("no image block: %+v", r.Content)
	}
	data, _ := base64.StdEncoding.DecodeString(r.Content[1].Data)
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width != 2000 || cfg.Height != 667 {
		t.Errorf("resized image: %v %+v", err, cfg)
	}
	if len(r.Content[1].Data) >= maxImageBase64 {
		t.Errorf("base64 is %d chars", len(r.Content[1].Data))
	}
}

func TestDetectImageMIME(t *testing.T) {
	apng := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR0123456789abcCRC!\x00\x00\x00\x08acTL01234567abcd")
	cases := []struct {
		in   []byte
		want string
	}{
		{[]byte("\xff\xd8\xff\xe0"), "image/jpeg"},
		{[]byte("GIF87a...."), "image/gif"},
		{[]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), "image/webp"},
		{[]byte("RIFF\x00\x00\x00\x00WAVE"), ""},
		{apng, ""},
		{[]byte("BM"), ""},
		{[]byte("\xff\xd8"), ""},
	}
	for _, c := range cases {
		if got := detectImageMIME(c.in); got != c.want {
			t.Errorf("detect(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestToFixed2(t *testing.T) {
	cases := map[float64]string{1.5: "1.50", 1.125: "1.13", 2.0 / 3: "0.67", 1.005: "1.00", 3000.0 / 7: "428.57"}
	for in, want := range cases {
		if got := toFixed2(in); got != want {
			t.Errorf("toFixed2(%v) = %q, want %q", in, got, want)
		}
	}
}

func countCalls(f *fakeWorkspace, call string) int {
	n := 0
	for _, c := range f.callLog() {
		if c == call {
			n++
		}
	}
	return n
}

// cancelingReader cancels its context after the first read, like a user
// pressing Esc while a huge file streams in.
type cancelingReader struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c cancelingReader) Read(p []byte) (int, error) {
	c.cancel()
	return c.r.Read(p)
}

type cancelWorkspace struct {
	*fakeWorkspace
	cancel context.CancelFunc
}

func (c cancelWorkspace) Open(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(cancelingReader{&lineGen{}, c.cancel}), nil // endless
}

func TestReadAbortsWhileStreaming(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFakeWorkspace(t)
	f.addFile("endless", "")
	tb := newTestToolbox(t, cancelWorkspace{f, cancel})
	r := tb.Call(ctx, "read", json.RawMessage(`{"path":"endless"}`), nil)
	wantText(t, r, true, "Operation aborted")
}
