package execpump

import (
	"strings"
	"sync"
)

// Head keeps the first Max bytes written to it and drops the rest, for a
// command's stderr that goes into an error message: it never blocks and
// never fails, so a chatty command cannot stall its pipe or the broker's
// memory. A transport may write to it from a goroutine of its own.
type Head struct {
	Max int

	mu sync.Mutex
	b  strings.Builder
}

// Write keeps what still fits and reports p as written.
func (h *Head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.Max - h.b.Len(); room > 0 {
		h.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String returns what was kept.
func (h *Head) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.String()
}
