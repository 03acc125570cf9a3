package broker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// readJSON is the one way a handler gets a JSON body: read whole under
// the body budget and the read deadline (readBody), then checked
// (checkJSON: depth, duplicate and case-folded keys, one value).
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	return data, nil
}

// decodeJSON reads a JSON body (readJSON) and decodes it into v, refusing
// unknown fields and naming the field of a type mismatch.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := s.readJSON(w, r)
	if err != nil {
		return err
	}
	return decodeChecked(data, v)
}

// readBody reads the whole (already size-limited) request body under the
// configured read deadline, so a slow body cannot hold a handler forever.
// Its bytes count against the broker's body budget until the request
// ends; over the budget the request gets 503 with Retry-After before
// anything runs.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if p := pacerFrom(r.Context()); p != nil && s.cfg.BodyReadTimeout > 0 {
		// The body's pace sets the connection's deadline; a JSON body
		// also has a whole-body deadline.
		p.limitTo(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	held := &heldBytes{budget: s.bodies}
	// The request's context ends when its handler returns: the body is
	// no longer held then.
	context.AfterFunc(r.Context(), held.release)
	data, err := held.read(r.Body, r.ContentLength)
	if errors.Is(err, errOverBudget) {
		w.Header().Set("Retry-After", "1")
		return nil, fmt.Errorf("%w: the broker holds as many request bodies as its body budget "+
			"(%d bytes, MaxBodyBytesInFlight) allows; retry shortly", opsapi.ErrUnavailable, s.bodies.limit)
	}
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.Is(err, errSlowBody) {
			return nil, badRequest("reading the request body: %v", err)
		}
		if errors.As(err, &maxBytes) {
			return nil, fmt.Errorf("request body is larger than %d bytes: %w", maxBytes.Limit, err)
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	return data, nil
}

// errOverBudget: taking a body's bytes would exceed the body budget.
var errOverBudget = errors.New("over the body budget")

// bodyBudget bounds the bytes of request bodies the broker holds in
// memory at once, over all requests: a per-body limit alone lets many
// parallel large bodies exhaust memory.
type bodyBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// inUse reports the bytes held now.
func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// heldBytes is what one request took from the budget.
type heldBytes struct {
	budget *bodyBudget
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
			return nil, errOverBudget
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
		return nil, errOverBudget
	}
	buf := make([]byte, 0, first)
	for {
		if len(buf) == cap(buf) {
			grow := int64(cap(buf))
			if !h.take(grow) {
				return nil, errOverBudget
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

// decodeChecked decodes a checked JSON body into v, refusing unknown
// fields and naming the field of a type mismatch.
func decodeChecked(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			field := typ.Field
			if field == "" {
				return badRequest("body: expected %s, got JSON %s at offset %d", jsonTypeName(typ.Type.String()), typ.Value, typ.Offset)
			}
			return badRequest("field %q: expected %s, got JSON %s at offset %d", field, jsonTypeName(typ.Type.String()), typ.Value, typ.Offset)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasPrefix(msg, "unknown field") {
			return badRequest("%s", msg)
		}
		return badRequest("decoding the body: %s", msg)
	}
	return nil
}

// jsonTypeName turns a Go type into the JSON type a client should send.
func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "array"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		if goType == "time.Duration" {
			return "number"
		}
		if strings.HasPrefix(goType, "json.") {
			return "JSON"
		}
		return "object"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "number"
	}
	return goType // string, bool
}
