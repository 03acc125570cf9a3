package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/wsbroker/wsbroker/opsapi"
)

type readTool struct {
	ops opsapi.ReadOperations
	env *toolEnv
}

func newReadTool(ops opsapi.ReadOperations, env *toolEnv) Tool { return &readTool{ops: ops, env: env} }

func (t *readTool) Definition() Definition { return definitionOf("read") }

type readArgs struct {
	Path   string   `json:"path"`
	Offset *float64 `json:"offset"`
	Limit  *float64 `json:"limit"`
}

type readDetails struct {
	Truncation *TruncationResult `json:"truncation,omitempty"`
}

// sniffLen is how much of a file read looks at to tell an image.
const sniffLen = 4100

// Execute reads a text file or an image as pi 1.6.0 does: the path is
// resolved with pi's variant probing (done through the workspace), text is
// streamed so only the lines shown are kept in memory, and images are
// recognised by content, converted (BMP) and shrunk to pi's inline limits.
func (t *readTool) Execute(ctx context.Context, raw json.RawMessage, _ UpdateFunc) (Result, error) {
	var args readArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return Result{}, err
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	rc, err := t.open(ctx, args.Path)
	if err != nil {
		return Result{}, err
	}
	defer rc.Close()

	br := getReader(rc)
	defer putReader(br)
	head, err := br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return Result{}, t.readErr(ctx, err)
	}
	if mime := detectImageMIME(head); mime != "" {
		t.env.logger.Debug("read image", "path", args.Path, "mime", mime)
		return t.readImage(ctx, br, mime)
	}
	return t.readText(ctx, br, args)
}

// readers are the buffered readers of read calls (two each, one sniffing
// the type and one splitting lines), pooled: a 4 KiB read allocated 128
// KiB of buffers, and a garbage collection for every few dozen reads.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

// putReader returns br to the pool; nothing may use it or what it
// returned (Peek, ReadSlice) afterwards.
func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// open opens the file to read: bash's full-output files from the
// toolbox's store (they are not in the workspace), anything else through
// the workspace with pi's path probing. Errors are the tool's texts.
func (t *readTool) open(ctx context.Context, p string) (io.ReadCloser, error) {
	if name, ok := spillName(p); ok {
		rc, err := t.env.spill.open(name)
		if err != nil {
			// Evicted, from before a restart, or never made.
			abs := strings.TrimPrefix(p, "@")
			return nil, nodeErr(opsapi.E("read", abs, opsapi.ErrNotExist, err), "access", abs)
		}
		return rc, nil
	}
	abs, err := t.env.resolveRead(ctx, t.ops, p)
	if err != nil {
		return nil, abortOr(ctx, nodeErr(err, "access", abs))
	}
	if err := checkAbort(ctx); err != nil {
		return nil, err
	}
	rc, err := t.ops.Open(ctx, abs)
	if err != nil {
		if errors.Is(err, opsapi.ErrIsDir) { // Node: readFile on a directory fails in read(2)
			return nil, abortOr(ctx, nodeErr(err, "read", ""))
		}
		return nil, abortOr(ctx, nodeErr(err, "open", abs))
	}
	return rc, nil
}

// readErr renders a failure while reading as Node's read(2) error, which
// names no path (e.g. "EISDIR: illegal operation on a directory, read").
func (t *readTool) readErr(ctx context.Context, err error) error {
	return abortOr(ctx, nodeErr(err, "read", ""))
}

// readText streams the file line by line (split on "\n", CRs kept),
// keeping only what the output can show.
func (t *readTool) readText(ctx context.Context, r *bufio.Reader, args readArgs) (Result, error) {
	startLine := 0
	if args.Offset != nil && *args.Offset != 0 && !math.IsNaN(*args.Offset) { // JS: offset ? max(0, offset-1) : 0
		startLine = int(math.Max(0, math.Min(math.Floor(*args.Offset)-1, math.MaxInt32)))
	}
	endLine := math.MaxInt // exclusive; lines past it are only counted
	hasLimit := args.Limit != nil
	if hasLimit {
		l := math.Floor(*args.Limit)
		if math.IsNaN(l) {
			l = 0
		}
		endLine = int(math.Max(math.Min(float64(startLine)+l, math.MaxInt32), math.MinInt32))
	}

	col := newHeadCollector(TruncationOptions{})
	total := 0
	// Once no later line can be shown, lines are only counted, and only
	// for countBudget bytes more (a 50 GB file must not take minutes).
	lim := newCountLimiter(r)
	lines := getReader(lim)
	defer putReader(lines)
	err := scanLines(ctx, lines, DefaultMaxBytes+1, func(prefix []byte, rawLen int, complete bool) {
		i := total
		total++
		if !lim.counting && i >= startLine && (i >= endLine || !col.keeping) {
			lim.start()
		}
		if i < startLine || i >= endLine {
			return
		}
		col.add(prefix, rawLen, complete)
	}, func() {
		if total >= startLine { // a shown line too long to show: only its size is left to find
			lim.start()
		}
	})
	if err != nil {
		return Result{}, t.readErr(ctx, err)
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}

	if startLine >= total {
		offset := 0.0 // only a truthy offset can pass the end
		if args.Offset != nil {
			offset = *args.Offset
		}
		return Result{}, toolErrorf("Offset %s is beyond end of file (%d lines total)", jsNumber(offset), total)
	}
	userLimited := 0
	if hasLimit {
		userLimited = min(endLine, total) - startLine
	}

	tr := col.result()
	startDisplay := startLine + 1
	var text string
	var details any
	switch {
	case tr.FirstLineExceedsLimit:
		size := FormatSize(col.firstLen)
		if lim.cut {
			size = "at least " + size
		}
		text = fmt.Sprintf("[Line %d is %s, exceeds %s limit. Use bash: sed -n '%dp' %s | head -c %d]",
			startDisplay, size, FormatSize(DefaultMaxBytes), startDisplay, args.Path, DefaultMaxBytes)
		details = readDetails{Truncation: &tr}
	case tr.Truncated:
		endDisplay := startDisplay + tr.OutputLines - 1
		text = tr.Content
		switch {
		case lim.cut:
			// pi's notice, with the total as the lower bound it is.
			text += fmt.Sprintf("\n\n[Showing lines %d-%d of at least %d (stopped counting after %s more). Use offset=%d to continue.]",
				startDisplay, endDisplay, total, FormatSize(int(countBudget)), endDisplay+1)
		case tr.By() == "lines":
			text += fmt.Sprintf("\n\n[Showing lines %d-%d of %d. Use offset=%d to continue.]",
				startDisplay, endDisplay, total, endDisplay+1)
		default:
			text += fmt.Sprintf("\n\n[Showing lines %d-%d of %d (%s limit). Use offset=%d to continue.]",
				startDisplay, endDisplay, total, FormatSize(DefaultMaxBytes), endDisplay+1)
		}
		details = readDetails{Truncation: &tr}
	case hasLimit && lim.cut:
		next := startLine + userLimited
		text = tr.Content + fmt.Sprintf("\n\n[At least %d more lines in file (stopped counting after %s more). Use offset=%d to continue.]",
			total-next, FormatSize(int(countBudget)), next+1)
	case hasLimit && startLine+userLimited < total:
		next := startLine + userLimited
		text = tr.Content + fmt.Sprintf("\n\n[%d more lines in file. Use offset=%d to continue.]", total-next, next+1)
	default:
		text = tr.Content
	}
	return Result{Content: []Content{TextContent(text)}, Details: details}, nil
}

// scanLines calls fn for every line of r as String.split("\n") sees it
// (so n newlines give n+1 lines, the last possibly empty), passing at most
// keep bytes of the line, its full length, and whether the prefix is the
// whole line. Memory stays bounded by keep whatever the line lengths.
// onLong, when set, is called as a line grows past keep bytes.
func scanLines(ctx context.Context, r *bufio.Reader, keep int, fn func(prefix []byte, rawLen int, complete bool), onLong func()) error {
	var buf []byte
	rawLen := 0
	for {
		if ctx.Err() != nil { // a backend's reader may not watch ctx itself
			return errAborted
		}
		chunk, err := r.ReadSlice('\n')
		end := len(chunk)
		nl := end > 0 && chunk[end-1] == '\n'
		if nl {
			end--
		}
		if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(end, room)]...)
		}
		if onLong != nil && rawLen <= keep && rawLen+end > keep {
			onLong()
		}
		rawLen += end
		switch {
		case nl:
			fn(buf, rawLen, rawLen == len(buf))
			buf, rawLen = buf[:0], 0
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			fn(buf, rawLen, rawLen == len(buf))
			return nil
		case err != nil:
			return err
		}
	}
}

// decodedLen is the UTF-8 length of line once decoded as Node's decoder
// does (each invalid byte becomes U+FFFD, 3 bytes), without allocating.
// For a line cut at the keep limit it is the raw length.
func decodedLen(prefix []byte, rawLen int, complete bool) int {
	if !complete || utf8.Valid(prefix) {
		return rawLen
	}
	n := 0
	for i := 0; i < len(prefix); {
		r, size := utf8.DecodeRune(prefix[i:])
		if r == utf8.RuneError && size == 1 {
			n += len("\uFFFD")
		} else {
			n += size
		}
		i += size
	}
	return n
}

// decodeLine returns the line as Node's UTF-8 decoder would.
func decodeLine(prefix []byte) string {
	if utf8.Valid(prefix) {
		return string(prefix)
	}
	var b strings.Builder
	for i := 0; i < len(prefix); {
		r, size := utf8.DecodeRune(prefix[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.Write(prefix[i : i+size])
		}
		i += size
	}
	return b.String()
}

// headCollector computes TruncateHead(strings.Join(lines, "\n"), opts) for
// a stream of lines while storing only the lines the result can contain.
type headCollector struct {
	opts      TruncationOptions
	count     int // lines added
	bytes     int // bytes of the joined lines
	lastEmpty bool
	firstLen  int
	kept      []string
	keptBytes int // bytes of strings.Join(kept, "\n")
	keeping   bool
}

func newHeadCollector(opts TruncationOptions) *headCollector {
	return &headCollector{opts: opts.withDefaults(), keeping: true}
}

// add appends a line: prefix holds its first bytes (all of them when
// complete) and rawLen its length. Only lines the result can show are
// decoded and stored.
func (c *headCollector) add(prefix []byte, rawLen int, complete bool) {
	n := decodedLen(prefix, rawLen, complete)
	if c.count == 0 {
		c.firstLen = n
	} else {
		c.bytes++
	}
	c.bytes += n
	c.count++
	c.lastEmpty = n == 0
	if !c.keeping {
		return
	}
	cost := n
	if len(c.kept) > 0 {
		cost++
	}
	if !complete || len(c.kept) > c.opts.MaxLines || c.keptBytes+cost > c.opts.MaxBytes {
		c.keeping = false
		return
	}
	c.kept = append(c.kept, decodeLine(prefix))
	c.keptBytes += cost
}

func (c *headCollector) result() TruncationResult {
	lines := c.count // splitLines: "" is no line, a trailing "\n" adds none
	if c.count > 0 && c.lastEmpty {
		lines--
	}
	r := TruncationResult{
		TotalLines: lines, TotalBytes: c.bytes,
		MaxLines: c.opts.MaxLines, MaxBytes: c.opts.MaxBytes,
	}
	if lines <= c.opts.MaxLines && c.bytes <= c.opts.MaxBytes {
		// Everything fits, so everything was kept.
		r.Content = strings.Join(c.kept, "\n")
		r.OutputLines, r.OutputBytes = lines, len(r.Content)
		return r
	}
	r.Truncated = true
	if c.firstLen > c.opts.MaxBytes {
		r.TruncatedBy, r.FirstLineExceedsLimit = &byBytes, true
		return r
	}
	n, size := 0, 0
	for n < lines && n < c.opts.MaxLines {
		if n >= len(c.kept) { // not kept: it did not fit the byte budget
			r.TruncatedBy = &byBytes
			break
		}
		cost := len(c.kept[n])
		if n > 0 {
			cost++
		}
		if size+cost > c.opts.MaxBytes {
			r.TruncatedBy = &byBytes
			break
		}
		size += cost
		n++
	}
	if r.TruncatedBy == nil {
		r.TruncatedBy = &byLines
	}
	r.Content = strings.Join(c.kept[:n], "\n")
	r.OutputLines, r.OutputBytes = n, len(r.Content)
	return r
}
