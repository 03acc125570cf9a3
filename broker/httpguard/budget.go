package httpguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrOverBudget: taking a body's bytes would exceed the body budget.
var ErrOverBudget = errors.New("over the body budget")

// BodyBudget bounds the bytes of request bodies a server holds in memory
// at once, over all requests: a per-body limit alone lets many parallel
// large bodies exhaust memory.
type BodyBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

func (b *BodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *BodyBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// InUse reports the bytes held now.
func (b *BodyBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// NewBodyBudget is a budget of limit bytes.
func NewBodyBudget(limit int64) *BodyBudget { return &BodyBudget{limit: limit} }

// Limit is the budget's size in bytes.
func (b *BodyBudget) Limit() int64 { return b.limit }

// Read reads a whole request body of declared length (<= 0: unknown)
// into memory, its bytes taken from the budget until ctx ends (the
// request's context ends when its handler returns). Over the budget it is
// ErrOverBudget, before the body is read on.
func (b *BodyBudget) Read(ctx context.Context, body io.Reader, declared int64) ([]byte, error) {
	held := &heldBytes{budget: b}
	context.AfterFunc(ctx, held.release)
	return held.read(body, declared)
}

// heldBytes is what one request took from the budget.
type heldBytes struct {
	budget *BodyBudget
	mu     sync.Mutex
	n      int64
}

func (h *heldBytes) take(n int64) bool {
	if !h.budget.take(n) {
		return false
	}
	h.mu.Lock()
	h.n += n
	h.mu.Unlock()
	return true
}

func (h *heldBytes) release() {
	h.mu.Lock()
	n := h.n
	h.n = 0
	h.mu.Unlock()
	h.budget.give(n)
}

// read reads body into one buffer: of the declared length at once (no
// regrowth copies), or, for a body of unknown length, growing by
// doubling with each growth taken from the budget first.
func (h *heldBytes) read(body io.Reader, declared int64) ([]byte, error) {
	if declared > 0 {
		if !h.take(declared) {
			return nil, ErrOverBudget
		}
		buf := make([]byte, declared)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, err
		}
		// Read on to the end: net/http starts watching for the client's
		// disconnect (which cancels a running command) only once the body
		// has hit EOF, and the body's deadline is cleared then.
		var more [1]byte
		if n, err := body.Read(more[:]); n > 0 || (err != nil && !errors.Is(err, io.EOF)) {
			return nil, fmt.Errorf("the body does not end at its Content-Length: %w", cmp.Or(err, io.ErrUnexpectedEOF))
		}
		return buf, nil
	}
	const first = 4 << 10
	if !h.take(first) {
		return nil, ErrOverBudget
	}
	buf := make([]byte, 0, first)
	for {
		if len(buf) == cap(buf) {
			grow := int64(cap(buf))
			if !h.take(grow) {
				return nil, ErrOverBudget
			}
			bigger := make([]byte, len(buf), cap(buf)+int(grow))
			copy(bigger, buf)
			buf = bigger
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
