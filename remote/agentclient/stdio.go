package agentclient

import (
	"io"
	"strconv"
	"sync"
	"syscall"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
)

// stdinChunk is how much of the caller's stdin one Read takes, and so
// the largest FrameStdin (within agent.MaxFrame).
const stdinChunk = 32 << 10

// pumpStdin sends r to the command's stdin, within the agent's credit,
// and its end (EOF or any error) as FrameStdinEOF. It stops when the call
// is over or the command's stdin has no reader left; it may then leave one
// Read of r in progress, which the caller ends.
func (x *execCall) pumpStdin(r io.Reader) {
	buf := make([]byte, stdinChunk)
	for {
		if x.stdinOver() {
			return
		}
		n, err := r.Read(buf)
		if n > 0 && !x.sendStdin(buf[:n]) {
			return
		}
		if err != nil {
			if !x.stdinOver() {
				_ = x.frame(agent.FrameStdinEOF, nil)
			}
			return
		}
	}
}

// stdinOver says the call is over or the command's stdin is closed.
func (x *execCall) stdinOver() bool {
	select {
	case <-x.done:
		return true
	case <-x.stdinClosed:
		return true
	default:
		return false
	}
}

// sendStdin sends b as the agent's credit allows; false when the call is
// over, the stdin closed or the stream broken.
func (x *execCall) sendStdin(b []byte) bool {
	for len(b) > 0 {
		n := x.credit.take(len(b), x.done, x.stdinClosed)
		if n == 0 {
			return false
		}
		if x.frame(agent.FrameStdin, b[:n]) != nil {
			return false
		}
		b = b[n:]
	}
	return true
}

// forwardSignals sends each signal from sigs to the command's tree until
// the call is over. One the protocol cannot carry is dropped, as an
// undeliverable signal is.
func (x *execCall) forwardSignals(sigs <-chan syscall.Signal) {
	for {
		select {
		case <-x.done:
			return
		case sig, ok := <-sigs:
			if !ok {
				return
			}
			if sig < 1 || sig > agent.MaxSignal {
				continue
			}
			if x.frame(agent.FrameSignal, strconv.AppendInt(nil, int64(sig), 10)) != nil {
				return
			}
		}
	}
}

// forwardResizes sends each size from sizes as the terminal's new size
// until the call is over.
func (x *execCall) forwardResizes(sizes <-chan opsapi.TTYSize) {
	for {
		select {
		case <-x.done:
			return
		case size, ok := <-sizes:
			if !ok {
				return
			}
			p := strconv.AppendUint(nil, uint64(size.Rows), 10)
			p = strconv.AppendUint(append(p, ' '), uint64(size.Cols), 10)
			if x.frame(agent.FrameResize, p) != nil {
				return
			}
		}
	}
}

// credit is how many stdin bytes may be sent now: agent.StdinWindow less
// those the agent has not acknowledged.
type credit struct {
	mu     sync.Mutex
	avail  int
	window int
	more   chan struct{} // signalled when avail grows
}

func newCredit(window int) *credit {
	return &credit{avail: window, window: window, more: make(chan struct{}, 1)}
}

// take waits for credit and takes up to n bytes of it; 0 once done or
// closed is closed.
func (c *credit) take(n int, done, closed <-chan struct{}) int {
	for {
		c.mu.Lock()
		if c.avail > 0 {
			k := min(n, c.avail)
			c.avail -= k
			c.mu.Unlock()
			return k
		}
		c.mu.Unlock()
		select {
		case <-c.more:
		case <-done:
			return 0
		case <-closed:
			return 0
		}
	}
}

// give returns n acknowledged bytes; an agent acknowledging more than was
// sent does not widen the window.
func (c *credit) give(n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.avail = min(c.avail+n, c.window)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
}
