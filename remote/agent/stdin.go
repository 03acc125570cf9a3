package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// stdinFeed writes the client's FrameStdin payloads to the command's
// stdin pipe. The stream's frame loop only queues (push, end): a command
// that does not read its stdin blocks this feed's goroutine, never the
// loop that must still see a kill. The queue holds at most StdinWindow
// bytes, the client's credit; each chunk that leaves it is acknowledged
// (FrameStdinAck), written or, once the pipe is broken, dropped.
type stdinFeed struct {
	w      *os.File                             // the agent's end of the command's stdin
	answer func(typ byte, payload []byte) error // sends a frame to the client

	mu          sync.Mutex
	queue       [][]byte
	outstanding int  // bytes received and not yet acknowledged
	eof         bool // the client's FrameStdinEOF came
	broken      bool // every holder of the pipe closed it: drop what comes
	stopped     bool // the stream is over
	wake        chan struct{}
}

func newStdinFeed(w *os.File, answer func(byte, []byte) error) *stdinFeed {
	return &stdinFeed{w: w, answer: answer, wake: make(chan struct{}, 1)}
}

// push queues one FrameStdin payload. An error is the client's breach of
// the protocol: stdin over its window or after its end.
func (f *stdinFeed) push(p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.eof:
		return errors.New("stdin after its end")
	case f.outstanding+len(p) > StdinWindow:
		return fmt.Errorf("stdin over the %d-byte window", StdinWindow)
	case len(p) == 0:
		return nil
	}
	f.queue = append(f.queue, bytes.Clone(p)) // p is the frame reader's buffer
	f.outstanding += len(p)
	f.poke()
	return nil
}

// end closes the command's stdin once the queue is written. A repeated
// end is harmless.
func (f *stdinFeed) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eof = true
	f.poke()
}

// stop ends the feed as the stream ends, unblocking a write the command
// does not read. It does not wait for run, which may be sending an ack
// until the stream is closed.
func (f *stdinFeed) stop() {
	f.mu.Lock()
	f.stopped = true
	f.poke()
	f.mu.Unlock()
	_ = f.w.Close() // the pipe is pollable: a pending Write returns
}

// poke wakes run; f.mu is held.
func (f *stdinFeed) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run writes the queue to the pipe until the client's end of stdin (then
// closes the pipe) or the stream's.
func (f *stdinFeed) run() {
	defer f.w.Close()
	for {
		chunk, write, ok := f.next()
		if !ok {
			return
		}
		if write {
			if _, err := f.w.Write(chunk); err != nil {
				// EPIPE: the command's processes have all closed their
				// stdin (or the stream is over). What is queued and what
				// comes is dropped, still acknowledged so the client's
				// pump never waits for credit; FrameStdinClosed tells it
				// to stop sending.
				f.breakPipe()
			}
		}
		f.mu.Lock()
		f.outstanding -= len(chunk)
		f.mu.Unlock()
		_ = f.answer(FrameStdinAck, strconv.AppendInt(nil, int64(len(chunk)), 10))
	}
}

// next waits for the next chunk; write is false when it is to be
// dropped, ok false when the feed is over.
func (f *stdinFeed) next() (chunk []byte, write, ok bool) {
	for {
		f.mu.Lock()
		switch {
		case f.stopped:
			f.mu.Unlock()
			return nil, false, false
		case len(f.queue) > 0:
			chunk = f.queue[0]
			f.queue[0] = nil
			f.queue = f.queue[1:]
			write = !f.broken
			f.mu.Unlock()
			return chunk, write, true
		case f.eof:
			f.mu.Unlock()
			return nil, false, false
		}
		f.mu.Unlock()
		<-f.wake
	}
}

// breakPipe marks the pipe broken and tells the client, once.
func (f *stdinFeed) breakPipe() {
	f.mu.Lock()
	first := !f.broken && !f.stopped
	f.broken = true
	f.mu.Unlock()
	if first {
		_ = f.answer(FrameStdinClosed, nil)
	}
}
