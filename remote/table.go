package remote

import (
	"errors"
	"sync"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Member is what a Table holds: a backend's workspace type.
type Member interface {
	comparable
	ID() string
	Destroyed() bool
}

// Table is a backend's live workspaces by id, and whether the backend
// was closed. The zero Table is empty and open.
type Table[W Member] struct {
	mu     sync.Mutex
	m      map[string]W
	closed bool
}

// Adopt returns the table's workspace id when it is not destroyed and
// same holds for it (nil: any), else the one made by make, which takes
// its place.
func (t *Table[W]) Adopt(id string, same func(W) bool, make func() W) W {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.m[id]; ok && !w.Destroyed() && (same == nil || same(w)) {
		return w
	}
	if t.m == nil {
		t.m = map[string]W{}
	}
	w := make()
	t.m[id] = w
	return w
}

// Forget removes w, when it is still the one under its id.
func (t *Table[W]) Forget(w W) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[w.ID()] == w {
		delete(t.m, w.ID())
	}
}

// All is every workspace in the table.
func (t *Table[W]) All() []W {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]W, 0, len(t.m))
	for _, w := range t.m {
		out = append(out, w)
	}
	return out
}

// Usable is ErrUnavailable once the table was closed.
func (t *Table[W]) Usable(op string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return opsapi.E(op, "", opsapi.ErrUnavailable, errors.New("backend closed"))
	}
	return nil
}

// Close marks the table closed and returns its workspaces; false when it
// was closed already.
func (t *Table[W]) Close() ([]W, bool) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, false
	}
	t.closed = true
	t.mu.Unlock()
	return t.All(), true
}
