package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// readBody reads the whole (already size-limited) request body under the
// configured read deadline, so a slow body cannot hold a handler forever.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	if s.cfg.BodyReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
		// Cleared afterwards: the server's background read that notices a
		// client disconnect runs under the same deadline.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, fmt.Errorf("request body is larger than %d bytes: %w", maxBytes.Limit, err)
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	return data, nil
}

// checkJSON verifies that data is exactly one JSON value with no duplicate
// object keys. encoding/json silently keeps the last of duplicate keys; a
// second parser (a policy, an audit log) might keep the first, so the broker
// refuses them rather than let two readers disagree.
func checkJSON(data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("request body is empty; expected JSON")
	}
	type frame struct {
		object    bool
		expectKey bool
		keys      map[string]struct{}
		path      string // where this container sits, e.g. "calls[0].arguments"
		key       string // the key whose value comes next (objects)
		idx       int    // the index of the next element (arrays)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	done := false
	for !done {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return syntaxProblem(err, off)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		d, isDelim := tok.(json.Delim)
		if isDelim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			done = len(stack) == 0
			continue
		}
		if top != nil && top.object && top.expectKey {
			key := tok.(string) // the decoder guarantees a string here
			if _, dup := top.keys[key]; dup {
				return badRequest("duplicate key %q in %s at offset %d", key, displayPath(top.path), skipSeparators(data, off))
			}
			top.keys[key] = struct{}{}
			top.key = key
			top.expectKey = false
			continue
		}
		// tok starts a value.
		path := ""
		if top != nil {
			if top.object {
				path = joinKey(top.path, top.key)
				top.expectKey = true
			} else {
				path = fmt.Sprintf("%s[%d]", top.path, top.idx)
				top.idx++
			}
		}
		switch {
		case isDelim && d == '{':
			stack = append(stack, &frame{object: true, expectKey: true, keys: map[string]struct{}{}, path: path})
		case isDelim && d == '[':
			stack = append(stack, &frame{path: path})
		default:
			done = len(stack) == 0
		}
	}
	off := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("unexpected data after the JSON value at offset %d", off)
	}
	return nil
}

// skipSeparators moves off past whitespace, commas and colons, to where
// the next token starts.
func skipSeparators(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func displayPath(p string) string {
	if p == "" {
		return "the top-level object"
	}
	return p
}

func syntaxProblem(err error, off int64) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return badRequest("malformed JSON at offset %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON at offset %d: unexpected end of input", off)
	}
	return badRequest("malformed JSON at offset %d: %v", off, err)
}

// decodeStrict decodes a checked JSON body into v, refusing unknown fields
// and naming the field of a type mismatch.
func decodeStrict(data []byte, v any) error {
	if err := checkJSON(data); err != nil {
		return err
	}
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
