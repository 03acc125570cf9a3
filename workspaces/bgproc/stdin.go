package bgproc

import (
	"context"
	"errors"
	"io"
	"sync"
)

// stdinQueue is a process's stdin: writers add pieces, the command's
// Exec reads them. It holds at most limit bytes, so a command that does
// not read its stdin makes writers wait (and give up with their context)
// rather than grow the broker's memory. A piece is taken whole or not at
// all, so a writer that gave up has sent nothing it was not told about.
type stdinQueue struct {
	limit int

	mu      sync.Mutex
	buf     []byte
	closed  bool          // no more writes: the reader gets EOF once buf is empty
	gone    bool          // the reader is done: writes fail
	changed chan struct{} // closed and replaced on every change
}

// errStdinClosed is a write after CloseStdin; errProcessEnded one after
// the command stopped reading for good.
var (
	errStdinClosed  = errors.New("stdin is closed")
	errProcessEnded = errors.New("the process has ended")
)

func newStdinQueue(limit int) *stdinQueue {
	return &stdinQueue{limit: limit, changed: make(chan struct{})}
}

func (q *stdinQueue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// write adds p in pieces of at most the queue's limit, each once it fits.
// It returns how many bytes were queued.
func (q *stdinQueue) write(ctx context.Context, p []byte) (int, error) {
	done := 0
	for done < len(p) {
		piece := p[done:min(len(p), done+q.limit)]
		q.mu.Lock()
		switch {
		case q.closed:
			q.mu.Unlock()
			return done, errStdinClosed
		case q.gone:
			q.mu.Unlock()
			return done, errProcessEnded
		case len(q.buf)+len(piece) <= q.limit:
			q.buf = append(q.buf, piece...)
			q.notify()
			q.mu.Unlock()
			done += len(piece)
			continue
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return done, ctx.Err()
		}
	}
	return done, nil
}

// close ends the stream: the command reads EOF after what is queued.
func (q *stdinQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.notify()
	}
}

// isClosed reports whether no more can be written.
func (q *stdinQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed || q.gone
}

// stop is the reader's end: what is queued is dropped and writers fail.
func (q *stdinQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gone = true
	q.buf = nil
	q.notify()
}

// Read is the command's side.
func (q *stdinQueue) Read(p []byte) (int, error) {
	for {
		q.mu.Lock()
		if len(q.buf) > 0 {
			n := copy(p, q.buf)
			q.buf = q.buf[n:]
			if len(q.buf) == 0 {
				q.buf = nil
			}
			q.notify()
			q.mu.Unlock()
			return n, nil
		}
		if q.closed || q.gone {
			q.mu.Unlock()
			return 0, io.EOF
		}
		ch := q.changed
		q.mu.Unlock()
		<-ch
	}
}
