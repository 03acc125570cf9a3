package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Rolling-tail sizes (pi's output-accumulator.ts): the tail keeps at least
// twice the output limit so that a snapshot always has a full window to
// truncate, and is trimmed back only when it doubles, so trimming is rare.
const (
	accumulatorMaxRolling = 2 * DefaultMaxBytes
	// accumulatorPiece bounds how much of one Write is processed at once,
	// so a single huge write cannot grow the tail beyond its bound.
	accumulatorPiece = 64 * 1024
)

// SpillOpener starts the file that receives a command's full raw output.
// It returns the path the model is told about and the writer; closing the
// writer must not return before the file is complete, and a Close error
// means the file was not saved.
type SpillOpener func() (path string, w io.WriteCloser, err error)

// OutputAccumulator collects a command's output with bounded memory, as
// pi's OutputAccumulator does: a streaming UTF-8 decode into a rolling tail,
// running counters for the totals, and, once the output is over the limits,
// every raw byte streamed to a spill file. It is an io.Writer; writes after
// Finish are ignored. It is safe for concurrent use.
type OutputAccumulator struct {
	mu     sync.Mutex
	opts   TruncationOptions
	open   SpillOpener
	onErr  func(error) // reports a failed spill; the command goes on
	closed bool

	dec utf8StreamDecoder
	// tail holds the end of the decoded output; when cutMidLine is set its
	// first line is the end of a longer line and snapshots drop it.
	tail       []byte
	cutMidLine bool
	scratch    []byte // decode buffer, reused

	rawBytes       int64
	decodedBytes   int64
	completedLines int64
	lineBytes      int64 // bytes of the current, unterminated line
	prevLineBytes  int64 // bytes of the last completed line

	// Raw chunks are kept until the output passes a limit, then flushed
	// into the spill file, which receives everything after.
	pending   [][]byte
	spilled   bool // a spill was attempted (it may have failed)
	spillPath string
	spill     io.WriteCloser
}

// NewOutputAccumulator returns an accumulator truncating to opts (zero
// fields take pi's defaults). open may be nil: the output is then never
// saved. onErr, if not nil, is told when saving fails.
func NewOutputAccumulator(opts TruncationOptions, open SpillOpener, onErr func(error)) *OutputAccumulator {
	return &OutputAccumulator{opts: opts.withDefaults(), open: open, onErr: onErr}
}

// Write takes raw output bytes. It never fails: a failed spill only loses
// the file, never the command.
func (a *OutputAccumulator) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return len(p), nil // late output after the result was built (pi ≥0.79.4)
	}
	n := len(p)
	for len(p) > 0 {
		piece := p[:min(len(p), accumulatorPiece)]
		p = p[len(piece):]
		a.writePiece(piece)
	}
	return n, nil
}

func (a *OutputAccumulator) writePiece(p []byte) {
	a.rawBytes += int64(len(p))
	a.scratch = a.dec.decode(a.scratch[:0], p)
	a.addDecoded(a.scratch)

	switch {
	case a.spill != nil:
		a.writeSpill(p)
	case !a.spilled:
		a.pending = append(a.pending, bytes.Clone(p))
		if a.overLimits(true) {
			a.startSpill()
		}
	}
}

// addDecoded appends valid UTF-8 to the tail and updates the counters.
func (a *OutputAccumulator) addDecoded(d []byte) {
	if len(d) == 0 {
		return
	}
	a.decodedBytes += int64(len(d))
	if i := bytes.LastIndexByte(d, '\n'); i >= 0 {
		a.completedLines += int64(bytes.Count(d, []byte{'\n'}))
		if j := bytes.LastIndexByte(d[:i], '\n'); j >= 0 {
			a.prevLineBytes = int64(i - j - 1)
		} else {
			a.prevLineBytes = a.lineBytes + int64(i)
		}
		a.lineBytes = int64(len(d) - i - 1)
	} else {
		a.lineBytes += int64(len(d))
	}
	a.tail = append(a.tail, d...)
	if len(a.tail) > 2*accumulatorMaxRolling {
		a.trimTail()
	}
}

// trimTail keeps the last accumulatorMaxRolling bytes, starting at a rune
// boundary, in place so the buffer is reused.
func (a *OutputAccumulator) trimTail() {
	start := len(a.tail) - accumulatorMaxRolling
	for start < len(a.tail) && !utf8.RuneStart(a.tail[start]) {
		start++
	}
	a.cutMidLine = a.tail[start-1] != '\n'
	n := copy(a.tail, a.tail[start:])
	a.tail = a.tail[:n]
}

func (a *OutputAccumulator) lines() int64 {
	if a.lineBytes > 0 {
		return a.completedLines + 1
	}
	return a.completedLines
}

// overLimits reports whether the output is past a limit; withRaw also
// counts undecoded bytes, which is what starts the spill.
func (a *OutputAccumulator) overLimits(withRaw bool) bool {
	maxBytes := int64(a.opts.MaxBytes)
	return (withRaw && a.rawBytes > maxBytes) || a.decodedBytes > maxBytes ||
		a.lines() > int64(a.opts.MaxLines)
}

func (a *OutputAccumulator) startSpill() {
	a.spilled = true
	pending := a.pending
	a.pending = nil
	if a.open == nil {
		return
	}
	path, w, err := a.open()
	if err != nil {
		a.report(fmt.Errorf("save full output: %w", err))
		return
	}
	a.spill, a.spillPath = w, path
	for _, c := range pending {
		if a.spill == nil {
			break
		}
		a.writeSpill(c)
	}
}

func (a *OutputAccumulator) writeSpill(p []byte) {
	if _, err := a.spill.Write(p); err != nil {
		a.abandonSpill(fmt.Errorf("save full output to %s: %w", a.spillPath, err))
	}
}

// abandonSpill gives up on the file: with an atomic writer, a writer
// closed with an error leaves nothing behind, so the path is forgotten.
func (a *OutputAccumulator) abandonSpill(err error) {
	a.report(err)
	if c, ok := a.spill.(interface{ CloseWithError(error) error }); ok {
		_ = c.CloseWithError(err)
	} else {
		_ = a.spill.Close()
	}
	a.spill, a.spillPath = nil, ""
}

func (a *OutputAccumulator) report(err error) {
	if a.onErr != nil {
		a.onErr(err)
	}
}

// OutputSnapshot is the output so far, truncated to its tail.
type OutputSnapshot struct {
	// Truncation is TruncateTail of the rolling tail, with the totals
	// taken from the counters (so they cover the whole output).
	Truncation TruncationResult
	// FullOutputPath names the spill file, empty when there is none.
	FullOutputPath string
	// RawBytes counts every byte written before the snapshot.
	RawBytes int64
	// LastLineBytes is the size of the output's last line (the open one,
	// or the last completed one when the output ends with a newline).
	LastLineBytes int64
}

// Snapshot returns the current tail.
func (a *OutputAccumulator) Snapshot() OutputSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.snapshot()
}

func (a *OutputAccumulator) snapshot() OutputSnapshot {
	text := a.tail
	if a.cutMidLine {
		if i := bytes.IndexByte(text, '\n'); i >= 0 && i+1 < len(text) {
			text = text[i+1:]
		}
	}
	tr := TruncateTail(string(text), a.opts)
	tr.TotalLines = int(a.lines())
	tr.TotalBytes = int(a.decodedBytes)
	tr.Truncated = a.overLimits(false)
	if tr.Truncated && tr.TruncatedBy == nil {
		// The kept tail fits, but the whole output did not (its start was
		// already dropped): say which limit the whole output passed.
		if a.decodedBytes > int64(a.opts.MaxBytes) {
			tr.TruncatedBy = &byBytes
		} else {
			tr.TruncatedBy = &byLines
		}
	}
	last := a.lineBytes
	if last == 0 {
		last = a.prevLineBytes
	}
	return OutputSnapshot{Truncation: tr, FullOutputPath: a.spillPath, RawBytes: a.rawBytes, LastLineBytes: last}
}

// Finish ends the output: a partial UTF-8 sequence becomes U+FFFD, a
// truncated output is saved if it was not already, the spill file is
// closed (and complete when Finish returns), and later writes are ignored.
// It returns the final snapshot; calling it again returns the same.
func (a *OutputAccumulator) Finish() OutputSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		a.addDecoded(a.dec.flush(a.scratch[:0]))
		if !a.spilled && a.overLimits(false) {
			a.startSpill()
		}
		a.pending = nil
		if a.spill != nil {
			if err := a.spill.Close(); err != nil {
				a.report(fmt.Errorf("save full output to %s: %w", a.spillPath, err))
				a.spillPath = ""
			}
			a.spill = nil
		}
	}
	return a.snapshot()
}

// utf8StreamDecoder decodes UTF-8 across chunk boundaries exactly as the
// WHATWG decoder behind JavaScript's TextDecoder does: valid sequences pass
// through, and each maximal invalid subpart becomes one U+FFFD.
type utf8StreamDecoder struct {
	seq    [4]byte // the bytes of the sequence in progress
	seen   int
	needed int  // continuation bytes still expected
	lower  byte // bounds of the next continuation byte
	upper  byte
}

var replacement = []byte(string(utf8.RuneError))

// decode appends the decoding of p to dst.
func (d *utf8StreamDecoder) decode(dst, p []byte) []byte {
	if d.needed == 0 {
		n := validPrefix(p)
		dst = append(dst, p[:n]...)
		p = p[n:]
	}
	for i := 0; i < len(p); {
		b := p[i]
		if d.needed == 0 {
			if b < utf8.RuneSelf {
				j := i + 1
				for j < len(p) && p[j] < utf8.RuneSelf {
					j++
				}
				dst = append(dst, p[i:j]...)
				i = j
				continue
			}
			i++
			d.lower, d.upper = 0x80, 0xBF
			switch {
			case b >= 0xC2 && b <= 0xDF:
				d.needed = 1
			case b >= 0xE0 && b <= 0xEF:
				d.needed = 2
				if b == 0xE0 {
					d.lower = 0xA0
				} else if b == 0xED {
					d.upper = 0x9F
				}
			case b >= 0xF0 && b <= 0xF4:
				d.needed = 3
				if b == 0xF0 {
					d.lower = 0x90
				} else if b == 0xF4 {
					d.upper = 0x8F
				}
			default:
				dst = append(dst, replacement...)
				continue
			}
			d.seq[0], d.seen = b, 1
			continue
		}
		if b < d.lower || b > d.upper {
			// The sequence is broken; b is looked at again as a new start.
			d.reset()
			dst = append(dst, replacement...)
			continue
		}
		i++
		d.lower, d.upper = 0x80, 0xBF
		d.seq[d.seen] = b
		d.seen++
		d.needed--
		if d.needed == 0 {
			dst = append(dst, d.seq[:d.seen]...)
			d.reset()
		}
	}
	return dst
}

// flush ends the stream: an unfinished sequence becomes U+FFFD.
func (d *utf8StreamDecoder) flush(dst []byte) []byte {
	if d.needed != 0 {
		d.reset()
		dst = append(dst, replacement...)
	}
	return dst
}

func (d *utf8StreamDecoder) reset() {
	d.seen, d.needed, d.lower, d.upper = 0, 0, 0x80, 0xBF
}

// validPrefix is the fast path for the usual chunk: it returns len(p), or
// less by an unfinished sequence at the end, when all before is valid
// UTF-8, and 0 otherwise (the byte-wise decoder then does the work).
func validPrefix(p []byte) int {
	end := len(p)
	for k := 1; k <= 3 && k <= len(p); k++ {
		if utf8.RuneStart(p[end-k]) {
			if !utf8.FullRune(p[end-k:]) {
				end -= k
			}
			break
		}
	}
	if utf8.Valid(p[:end]) {
		return end
	}
	return 0
}

// spillStallTimeout bounds how long the spill may block the command's
// output: a backend whose WriteFile stops reading (a lost connection) costs
// the file, never a hung call.
const spillStallTimeout = 30 * time.Second

var errSpillStalled = errors.New("spill writer stalled")

// pipeSpill streams a spill file through an io.Pipe into a writer that
// consumes a reader (opsapi.WriteOperations.WriteFile) running in its own
// goroutine, so the file is written as the output arrives and memory stays
// bounded.
type pipeSpill struct {
	pw      *io.PipeWriter
	done    chan error
	cancel  context.CancelFunc
	stall   time.Duration
	timer   *time.Timer // fires when one Write is blocked longer than stall
	stalled atomic.Bool
}

// startPipeSpill runs write in a goroutine with a context that ends when
// the spill is abandoned; write reads what is written to the returned
// spill. A Write blocked longer than stall fails, and Close waits at most
// that long for write to return.
func startPipeSpill(ctx context.Context, stall time.Duration, write func(ctx context.Context, r io.Reader) error) *pipeSpill {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	s := &pipeSpill{pw: pw, done: make(chan error, 1), cancel: cancel, stall: stall}
	s.timer = time.AfterFunc(time.Hour, func() {
		s.stalled.Store(true)
		cancel()
		_ = pw.CloseWithError(errSpillStalled)
	})
	s.timer.Stop()
	go func() {
		err := write(ctx, pr)
		if err == nil {
			err = errSpillStopped
		}
		// Unblocks a Write still waiting if write stopped reading early.
		pr.CloseWithError(err)
		if errors.Is(err, errSpillStopped) {
			err = nil
		}
		s.done <- err
	}()
	return s
}

var errSpillStopped = errors.New("spill writer stopped reading")

func (s *pipeSpill) Write(p []byte) (int, error) {
	s.timer.Reset(s.stall)
	n, err := s.pw.Write(p)
	s.timer.Stop()
	if err != nil && s.stalled.Load() {
		err = errSpillStalled
	}
	return n, err
}

// Close ends the stream and waits until the file is complete.
func (s *pipeSpill) Close() error {
	_ = s.pw.Close()
	return s.wait()
}

// CloseWithError makes the writer fail (an atomic writer then leaves no
// file) and waits for it.
func (s *pipeSpill) CloseWithError(err error) error {
	s.cancel()
	_ = s.pw.CloseWithError(err)
	_ = s.wait()
	return nil
}

func (s *pipeSpill) wait() error {
	defer s.cancel()
	t := time.NewTimer(s.stall)
	defer t.Stop()
	select {
	case err := <-s.done:
		return err
	case <-t.C:
		return errSpillStalled
	}
}
