package bgproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Ring is a log of a byte stream that keeps its last Size bytes in a
// file. One writer, any number of readers. Reads never block the writer:
// a reader whose bytes were overwritten while it read them learns so and
// is moved forward.
type Ring struct {
	f    *os.File
	size int64

	mu      sync.Mutex
	written int64 // bytes ever written: the offset of the next byte
	// reserved is written plus the bytes of a write in progress: their
	// slots hold neither the old bytes nor yet the new ones.
	reserved int64
	closed   bool          // the writer is done: the stream ends at written
	changed  chan struct{} // closed and replaced on each write and at close
}

// NewRing makes a ring of size bytes in a new file at path.
func NewRing(path string, size int64) (*Ring, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ring size %d is not positive", size)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("process log: %w", err)
	}
	return &Ring{f: f, size: size, changed: make(chan struct{})}, nil
}

// Write appends p, overwriting the oldest bytes once the ring is full.
// Only the last Size bytes of p are stored when p is larger.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	r.mu.Lock()
	start := r.written
	r.reserved = start + int64(n)
	r.mu.Unlock()
	if int64(len(p)) > r.size {
		skip := int64(len(p)) - r.size
		p, start = p[skip:], start+skip
	}
	for rest, off := p, start; len(rest) > 0; {
		pos := off % r.size
		chunk := rest[:min(int64(len(rest)), r.size-pos)]
		if _, err := r.f.WriteAt(chunk, pos); err != nil {
			return 0, fmt.Errorf("process log: %w", err)
		}
		rest, off = rest[len(chunk):], off+int64(len(chunk))
	}
	r.mu.Lock()
	r.written += int64(n)
	r.notify()
	r.mu.Unlock()
	return n, nil
}

// notify wakes every waiter; r.mu is held.
func (r *Ring) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// CloseWrite ends the stream: readers that reach its end get io.EOF
// from Wait.
func (r *Ring) CloseWrite() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.notify()
	}
}

// Span is what the ring holds: bytes [First, Written). While a write is
// in progress First already excludes the bytes it overwrites.
type Span struct {
	First, Written int64
	Closed         bool
}

// Span says which offsets the ring holds now.
func (r *Ring) Span() Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.span()
}

func (r *Ring) span() Span {
	return Span{First: max(0, r.reserved-r.size), Written: r.written, Closed: r.closed}
}

// ReadAt reads into p the bytes from offset off on. When the ring no
// longer holds off, reading starts at the oldest byte it holds: from is
// where the bytes read begin (from > off says that [off, from) was
// dropped). n is 0 at the end of what has been written so far.
func (r *Ring) ReadAt(p []byte, off int64) (n int, from int64, err error) {
	if off < 0 {
		return 0, 0, fmt.Errorf("offset %d is negative", off)
	}
	for {
		sp := r.Span()
		from = max(off, sp.First)
		if from >= sp.Written {
			return 0, min(from, sp.Written), nil
		}
		want := min(int64(len(p)), sp.Written-from)
		got := int64(0)
		for got < want {
			pos := (from + got) % r.size
			m, err := r.f.ReadAt(p[got:got+min(want-got, r.size-pos)], pos)
			got += int64(m)
			if err != nil {
				return 0, from, fmt.Errorf("process log: %w", err)
			}
		}
		// The writer may have wrapped over what was just read; those bytes
		// are no longer the ones at these offsets.
		if r.Span().First <= from {
			return int(want), from, nil
		}
	}
}

// errClosed is Wait's answer once the stream has ended and off is at
// its end.
var errClosed = errors.New("process log ended")

// Wait returns when bytes past off exist, when the stream ended (errClosed
// if off is at its end), or when ctx ends (its error).
func (r *Ring) Wait(ctx context.Context, off int64) error {
	for {
		r.mu.Lock()
		written, closed, ch := r.written, r.closed, r.changed
		r.mu.Unlock()
		switch {
		case written > off:
			return nil
		case closed:
			return errClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Remove closes the ring and deletes its file.
func (r *Ring) Remove() error {
	r.CloseWrite()
	name := r.f.Name()
	r.f.Close()
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("process log: %w", err)
	}
	return nil
}
