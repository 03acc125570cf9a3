package httpguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxJSONDepth bounds the nesting of arrays and objects in every JSON
// body. Tool arguments and the broker's own bodies nest a few levels;
// a deeper body is an attack on the parsers downstream.
const MaxJSONDepth = 64

// errJSONSyntax marks a body the scanner could not parse; CheckJSON then
// asks encoding/json for its message, so clients read the usual wording.
var errJSONSyntax = errors.New("malformed JSON")

// CheckJSON verifies, in one pass over data and in memory linear in its
// size, that data is exactly one JSON value:
//   - nested at most MaxJSONDepth deep;
//   - with no object key given twice, nor two keys that differ only in
//     case. encoding/json matches struct fields without regard to case and
//     keeps the last of duplicates, while the audit trail, the policy's
//     pre-check or another parser might read the first: refusing both
//     makes every reader see the one value that runs.
//
// Nothing is decoded but the keys; string values are only walked.
func CheckJSON(data []byte) error {
	sc := jsonScanner{data: data}
	sc.space()
	if sc.pos == len(data) {
		return errors.New("request body is empty; expected JSON")
	}
	if err := sc.value(); err != nil {
		return sc.problem(err)
	}
	end := sc.pos
	sc.space()
	if sc.pos != len(data) {
		return fmt.Errorf("unexpected data after the JSON value at offset %d", end)
	}
	return nil
}

// jsonScanner is a recursive-descent JSON checker. Its recursion is
// bounded by MaxJSONDepth, so a hostile body cannot grow the stack; the
// only memory it keeps is the key set of each open object.
type jsonScanner struct {
	data  []byte
	pos   int
	stack []jsonFrame // the open containers, for error messages
}

// jsonFrame is one open container: an object's current key, or an
// array's current index.
type jsonFrame struct {
	object bool
	key    string
	idx    int
}

// problem turns a scan error into the message a client reads.
func (sc *jsonScanner) problem(err error) error {
	if !errors.Is(err, errJSONSyntax) {
		return err
	}
	if sc.pos >= len(sc.data) {
		return fmt.Errorf("malformed JSON at offset %d: unexpected end of input", sc.pos)
	}
	var syn *json.SyntaxError
	if jerr := json.Unmarshal(sc.data, new(json.RawMessage)); errors.As(jerr, &syn) {
		return fmt.Errorf("malformed JSON at offset %d: %s", sc.pos, strings.TrimPrefix(syn.Error(), "json: "))
	}
	return fmt.Errorf("malformed JSON at offset %d: unexpected byte %q", sc.pos, sc.data[sc.pos])
}

// path names where the scanner is, e.g. "calls[0].arguments"; built only
// for an error message.
func (sc *jsonScanner) path() string {
	var b strings.Builder
	for i, f := range sc.stack[:len(sc.stack)-1] {
		switch {
		case f.object && i > 0:
			b.WriteString("." + f.key)
		case f.object:
			b.WriteString(f.key)
		default:
			b.WriteString("[" + strconv.Itoa(f.idx) + "]")
		}
	}
	if b.Len() == 0 {
		return "the top-level object"
	}
	return b.String()
}

func (sc *jsonScanner) space() {
	for sc.pos < len(sc.data) {
		switch sc.data[sc.pos] {
		case ' ', '\t', '\r', '\n':
			sc.pos++
		default:
			return
		}
	}
}

func (sc *jsonScanner) value() error {
	if sc.pos >= len(sc.data) {
		return errJSONSyntax
	}
	switch c := sc.data[sc.pos]; {
	case c == '{' || c == '[':
		if len(sc.stack) == MaxJSONDepth {
			return fmt.Errorf("JSON nested deeper than %d levels at offset %d; the broker accepts at most %d",
				MaxJSONDepth, sc.pos, MaxJSONDepth)
		}
		sc.stack = append(sc.stack, jsonFrame{object: c == '{'})
		var err error
		if c == '{' {
			err = sc.object()
		} else {
			err = sc.array()
		}
		if err == nil {
			sc.stack = sc.stack[:len(sc.stack)-1]
		}
		return err
	case c == '"':
		_, _, err := sc.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return sc.number()
	case c == 't':
		return sc.literal("true")
	case c == 'f':
		return sc.literal("false")
	case c == 'n':
		return sc.literal("null")
	}
	return errJSONSyntax
}

func (sc *jsonScanner) object() error {
	sc.pos++ // '{'
	sc.space()
	if sc.pos < len(sc.data) && sc.data[sc.pos] == '}' {
		sc.pos++
		return nil
	}
	seen := map[string]string{} // folded key -> key as sent
	for {
		sc.space()
		at := sc.pos
		if at >= len(sc.data) || sc.data[at] != '"' {
			return errJSONSyntax
		}
		raw, escaped, err := sc.str()
		if err != nil {
			return err
		}
		key := string(raw)
		if escaped {
			if json.Unmarshal(sc.data[at:sc.pos], &key) != nil {
				sc.pos = at
				return errJSONSyntax
			}
		}
		top := &sc.stack[len(sc.stack)-1]
		top.key = key
		fold := foldKey(key)
		if prev, dup := seen[fold]; dup {
			if prev == key {
				return fmt.Errorf("duplicate key %q in %s at offset %d", key, sc.path(), at)
			}
			return fmt.Errorf("keys %q and %q in %s differ only in case at offset %d; "+
				"JSON keys are matched without regard to case, so both would set the same field",
				prev, key, sc.path(), at)
		}
		seen[fold] = key
		sc.space()
		if sc.pos >= len(sc.data) || sc.data[sc.pos] != ':' {
			return errJSONSyntax
		}
		sc.pos++
		sc.space()
		if err := sc.value(); err != nil {
			return err
		}
		if done, err := sc.next('}'); done || err != nil {
			return err
		}
	}
}

func (sc *jsonScanner) array() error {
	sc.pos++ // '['
	sc.space()
	if sc.pos < len(sc.data) && sc.data[sc.pos] == ']' {
		sc.pos++
		return nil
	}
	for {
		sc.space()
		if err := sc.value(); err != nil {
			return err
		}
		sc.stack[len(sc.stack)-1].idx++
		if done, err := sc.next(']'); done || err != nil {
			return err
		}
	}
}

// next consumes a ',' (another element follows) or the closing byte.
func (sc *jsonScanner) next(closing byte) (done bool, err error) {
	sc.space()
	if sc.pos >= len(sc.data) {
		return false, errJSONSyntax
	}
	switch sc.data[sc.pos] {
	case ',':
		sc.pos++
		return false, nil
	case closing:
		sc.pos++
		return true, nil
	}
	return false, errJSONSyntax
}

// str walks a string and returns its bytes between the quotes, and
// whether it holds an escape.
func (sc *jsonScanner) str() (raw []byte, escaped bool, err error) {
	start := sc.pos + 1
	for i := start; i < len(sc.data); i++ {
		switch c := sc.data[i]; {
		case c == '"':
			sc.pos = i + 1
			return sc.data[start:i], escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(sc.data) {
				sc.pos = len(sc.data)
				return nil, false, errJSONSyntax
			}
			switch sc.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(sc.data) || !isHex4(sc.data[i+2:i+6]) {
					sc.pos = i
					return nil, false, errJSONSyntax
				}
				i += 5
			default:
				sc.pos = i
				return nil, false, errJSONSyntax
			}
		case c < 0x20:
			sc.pos = i
			return nil, false, errJSONSyntax
		}
	}
	sc.pos = len(sc.data)
	return nil, false, errJSONSyntax
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(c)) {
			return false
		}
	}
	return true
}

// number walks -?int(.frac)?([eE][+-]?digits)?.
func (sc *jsonScanner) number() error {
	d := sc.data
	if d[sc.pos] == '-' {
		sc.pos++
	}
	switch {
	case sc.pos < len(d) && d[sc.pos] == '0':
		sc.pos++
	case sc.pos < len(d) && d[sc.pos] >= '1' && d[sc.pos] <= '9':
		sc.digits()
	default:
		return errJSONSyntax
	}
	if sc.pos < len(d) && d[sc.pos] == '.' {
		sc.pos++
		if sc.digits() == 0 {
			return errJSONSyntax
		}
	}
	if sc.pos < len(d) && (d[sc.pos] == 'e' || d[sc.pos] == 'E') {
		sc.pos++
		if sc.pos < len(d) && (d[sc.pos] == '+' || d[sc.pos] == '-') {
			sc.pos++
		}
		if sc.digits() == 0 {
			return errJSONSyntax
		}
	}
	return nil
}

func (sc *jsonScanner) digits() int {
	n := 0
	for sc.pos < len(sc.data) && sc.data[sc.pos] >= '0' && sc.data[sc.pos] <= '9' {
		sc.pos++
		n++
	}
	return n
}

// literal walks true, false or null; a mismatch is reported at the
// literal's start, where the bad token begins.
func (sc *jsonScanner) literal(lit string) error {
	start := sc.pos
	for i := 0; i < len(lit); i++ {
		if sc.pos >= len(sc.data) || sc.data[sc.pos] != lit[i] {
			if sc.pos < len(sc.data) {
				sc.pos = start
			}
			return errJSONSyntax
		}
		sc.pos++
	}
	return nil
}

// foldKey maps every key encoding/json would match to one string: each
// rune becomes the smallest rune of its case-folding orbit (so "K", "k"
// and the Kelvin sign U+212A all become "K", as bytes.EqualFold and
// encoding/json's field matching treat them alike).
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(s) // A-Z are the smallest of their ASCII orbits
	}
	var b strings.Builder
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// Decode decodes a checked JSON body (CheckJSON) into v, refusing
// unknown fields and naming the field of a type mismatch.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			field := typ.Field
			if field == "" {
				return fmt.Errorf("body: expected %s, got JSON %s at offset %d", jsonTypeName(typ.Type.String()), typ.Value, typ.Offset)
			}
			return fmt.Errorf("field %q: expected %s, got JSON %s at offset %d", field, jsonTypeName(typ.Type.String()), typ.Value, typ.Offset)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasPrefix(msg, "unknown field") {
			return errors.New(msg)
		}
		return fmt.Errorf("decoding the body: %s", msg)
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
