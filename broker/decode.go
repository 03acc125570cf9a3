package broker

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/wsbroker/wsbroker/broker/httpguard"
	"github.com/wsbroker/wsbroker/opsapi"
)

// MaxJSONDepth bounds the nesting of arrays and objects in every JSON
// body (httpguard.MaxJSONDepth).
const MaxJSONDepth = httpguard.MaxJSONDepth

// readJSON is the one way a handler gets a JSON body: read whole under
// the body budget and the read deadline (readBody), then checked
// (httpguard.CheckJSON: depth, duplicate and case-folded keys, one value).
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	if err := httpguard.CheckJSON(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
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
	if err := httpguard.Decode(data, v); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// readBody reads the whole (already size-limited) request body under the
// configured read deadline, so a slow body cannot hold a handler forever.
// Its bytes count against the broker's body budget until the request
// ends; over the budget the request gets 503 with Retry-After before
// anything runs.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if p := httpguard.PacerFrom(r.Context()); p != nil && s.cfg.BodyReadTimeout > 0 {
		// The body's pace sets the connection's deadline; a JSON body
		// also has a whole-body deadline.
		p.LimitTo(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	data, err := s.bodies.Read(r.Context(), r.Body, r.ContentLength)
	if errors.Is(err, httpguard.ErrOverBudget) {
		w.Header().Set("Retry-After", "1")
		return nil, fmt.Errorf("%w: the broker holds as many request bodies as its body budget "+
			"(%d bytes, MaxBodyBytesInFlight) allows; retry shortly", opsapi.ErrUnavailable, s.bodies.Limit())
	}
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.Is(err, httpguard.ErrSlowBody) {
			return nil, badRequest("reading the request body: %v", err)
		}
		if errors.As(err, &maxBytes) {
			return nil, fmt.Errorf("request body is larger than %d bytes: %w", maxBytes.Limit, err)
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	return data, nil
}
