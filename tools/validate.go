package tools

// Argument validation is a small JSON Schema subset written here rather than
// a general validator (e.g. santhosh-tekuri/jsonschema) because pi's
// behaviour is two schema-driven passes that a general validator does not
// give us: TypeBox's Value.Convert coercion before validation, and AJV's
// error texts ("must have required property 'path'") with pi's path format.
// The seven tool schemas use only object, properties, required,
// additionalProperties, string, number, integer, boolean, array, items and
// minItems; anything else in a schema is ignored, and validate_test.go pins
// the subset.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// schema is the subset of JSON Schema the tools use.
type schema struct {
	Type                 string             `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	AdditionalProperties *bool              `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	MinItems             *int               `json:"minItems"`

	propOrder []string // Properties in declaration order
}

var schemaCache sync.Map // schema text -> *schema

// compiledSchema parses raw once per distinct schema text.
func compiledSchema(raw json.RawMessage) (*schema, error) {
	if s, ok := schemaCache.Load(string(raw)); ok {
		return s.(*schema), nil
	}
	s, err := parseSchema(raw)
	if err != nil {
		return nil, err
	}
	schemaCache.Store(string(raw), s)
	return s, nil
}

// parseSchema reads a schema, remembering the declaration order of
// properties so errors come out in a stable, schema-like order.
func parseSchema(raw json.RawMessage) (*schema, error) {
	var s schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if err := fillPropOrder(&s, raw); err != nil {
		return nil, err
	}
	return &s, nil
}

func fillPropOrder(s *schema, raw json.RawMessage) error {
	var fields struct {
		Properties json.RawMessage `json:"properties"`
		Items      json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return err
	}
	if len(fields.Properties) > 0 {
		_, order := decodeArgs(fields.Properties)
		s.propOrder = order.keys
		var sub map[string]json.RawMessage
		if err := json.Unmarshal(fields.Properties, &sub); err != nil {
			return err
		}
		for name, r := range sub {
			if err := fillPropOrder(s.Properties[name], r); err != nil {
				return err
			}
		}
	}
	if len(fields.Items) > 0 && s.Items != nil {
		return fillPropOrder(s.Items, fields.Items)
	}
	return nil
}

// argOrder remembers the key order of a decoded JSON object tree, so that
// "Received arguments" prints keys as the model sent them (JSON.stringify
// keeps insertion order; Go maps do not).
type argOrder struct {
	keys     []string
	children map[string]*argOrder // by key, or by decimal index for arrays
}

// decodeArgs decodes a tool call's arguments. Empty or malformed JSON is
// treated as {} as pi's streaming JSON parser does.
func decodeArgs(raw json.RawMessage) (any, *argOrder) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, &argOrder{}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	v, order, err := decodeValue(dec)
	if err != nil {
		return map[string]any{}, &argOrder{}
	}
	if _, err := dec.Token(); err == nil { // trailing data
		return map[string]any{}, &argOrder{}
	}
	return v, order
}

// decodeArgValue is decodeArgs without the key order, in one copy of the
// strings: what a call that passes validation needs.
func decodeArgValue(raw json.RawMessage) any {
	var v any
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &v) != nil {
		return map[string]any{}
	}
	return v
}

func decodeValue(dec *json.Decoder) (any, *argOrder, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			order := &argOrder{children: map[string]*argOrder{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, nil, err
				}
				k, _ := kt.(string)
				v, child, err := decodeValue(dec)
				if err != nil {
					return nil, nil, err
				}
				if _, dup := m[k]; !dup {
					order.keys = append(order.keys, k)
				}
				m[k] = v // JSON.parse: the last duplicate wins
				order.children[k] = child
			}
			if _, err := dec.Token(); err != nil {
				return nil, nil, err
			}
			return m, order, nil
		case '[':
			a := []any{}
			order := &argOrder{children: map[string]*argOrder{}}
			for dec.More() {
				v, child, err := decodeValue(dec)
				if err != nil {
					return nil, nil, err
				}
				order.children[strconv.Itoa(len(a))] = child
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, nil, err
			}
			return a, order, nil
		}
	}
	return tok, nil, nil
}

// validateArguments coerces args against the schema (TypeBox Value.Convert)
// and validates the result. On failure the error text is pi's:
//
//	Validation failed for tool "<name>":
//	  - <path>: <message>
//
//	Received arguments:
//	<JSON.stringify(args, null, 2)>
//
// where the received arguments are the ones before coercion.
func validateArguments(name string, rawSchema json.RawMessage, args any, order *argOrder) (any, error) {
	s, err := compiledSchema(rawSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %s has an invalid schema: %w", name, err)
	}
	converted := convertValue(s, deepCopy(args))
	var problems []string
	checkValue(s, converted, "", &problems)
	if len(problems) == 0 {
		return converted, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Validation failed for tool %q:\n", name)
	b.WriteString(strings.Join(problems, "\n"))
	b.WriteString("\n\nReceived arguments:\n")
	b.WriteString(stringifyJS(args, order))
	return nil, fmt.Errorf("%s", b.String())
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, x := range t {
			a[i] = deepCopy(x)
		}
		return a
	}
	return v
}

// convertValue applies TypeBox Value.Convert's coercions for the types the
// schemas use: numeric strings and booleans to numbers, "true"/"false"/"1"/
// "0" and 1/0 to booleans, numbers and booleans to strings. Values that do
// not convert are left for validation to reject.
func convertValue(s *schema, v any) any {
	if s == nil {
		return v
	}
	switch s.Type {
	case "object":
		if m, ok := v.(map[string]any); ok {
			for k, sub := range s.Properties {
				if x, ok := m[k]; ok {
					m[k] = convertValue(sub, x)
				}
			}
		}
	case "array":
		if a, ok := v.([]any); ok {
			for i := range a {
				a[i] = convertValue(s.Items, a[i])
			}
		}
	case "number", "integer":
		switch t := v.(type) {
		case string:
			if f, ok := numericString(t); ok {
				return f
			}
		case bool:
			if t {
				return float64(1)
			}
			return float64(0)
		}
	case "boolean":
		switch t := v.(type) {
		case string:
			switch t {
			case "true", "1":
				return true
			case "false", "0":
				return false
			}
		case float64:
			switch t {
			case 1:
				return true
			case 0:
				return false
			}
		}
	case "string":
		switch t := v.(type) {
		case float64:
			return jsNumber(t)
		case bool:
			return strconv.FormatBool(t)
		}
	}
	return v
}

// numericString is TypeBox's IsStringNumeric followed by parseFloat.
func numericString(s string) (float64, bool) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// checkValue appends AJV-style problems ("  - <path>: <message>"). The path
// is the instance path without its leading '/', or for a missing property
// the property's name, or "root" for the whole arguments object (pi's
// formatting of AJV errors).
func checkValue(s *schema, v any, at string, problems *[]string) {
	if s == nil {
		return
	}
	report := func(path, msg string) {
		if path == "" {
			path = "root"
		}
		*problems = append(*problems, fmt.Sprintf("  - %s: %s", path, msg))
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			report(at, "must be object")
			return
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				p := r
				if at != "" {
					p = at + "/" + r
				}
				report(p, fmt.Sprintf("must have required property '%s'", r))
			}
		}
		if s.AdditionalProperties != nil && !*s.AdditionalProperties {
			extra := make([]string, 0)
			for k := range m {
				if _, ok := s.Properties[k]; !ok {
					extra = append(extra, k)
				}
			}
			sort.Strings(extra)
			for range extra {
				report(at, "must NOT have additional properties")
			}
		}
		for _, k := range s.propOrder {
			if x, ok := m[k]; ok {
				checkValue(s.Properties[k], x, join(at, k), problems)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			report(at, "must be array")
			return
		}
		if s.MinItems != nil && len(a) < *s.MinItems {
			report(at, fmt.Sprintf("must NOT have fewer than %d items", *s.MinItems))
		}
		for i, x := range a {
			checkValue(s.Items, x, join(at, strconv.Itoa(i)), problems)
		}
	case "string":
		if _, ok := v.(string); !ok {
			report(at, "must be string")
		}
	case "number":
		if _, ok := v.(float64); !ok {
			report(at, "must be number")
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != math.Trunc(f) {
			report(at, "must be integer")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			report(at, "must be boolean")
		}
	}
}

func join(at, k string) string {
	// JSON Pointer escaping, as AJV's instancePath has it.
	k = strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
	if at == "" {
		return k
	}
	return at + "/" + k
}

// stringifyJS is JSON.stringify(v, null, 2): two-space indent, keys in the
// order received (then any added by the argument shim, sorted), JavaScript
// number formatting, and only the escapes JSON.stringify makes.
func stringifyJS(v any, order *argOrder) string {
	var b strings.Builder
	writeJS(&b, v, order, "")
	return b.String()
}

func writeJS(b *strings.Builder, v any, order *argOrder, indent string) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			b.WriteString("null")
		} else {
			b.WriteString(jsNumber(t))
		}
	case int:
		b.WriteString(strconv.Itoa(t))
	case string:
		writeJSString(b, t)
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		inner := indent + "  "
		b.WriteString("[\n")
		for i, x := range t {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(inner)
			writeJS(b, x, order.child(strconv.Itoa(i)), inner)
		}
		b.WriteString("\n" + indent + "]")
	case map[string]any:
		if len(t) == 0 {
			b.WriteString("{}")
			return
		}
		inner := indent + "  "
		b.WriteString("{\n")
		for i, k := range order.orderKeys(t) {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(inner)
			writeJSString(b, k)
			b.WriteString(": ")
			writeJS(b, t[k], order.child(k), inner)
		}
		b.WriteString("\n" + indent + "}")
	default:
		// Values a Preparer may build; fall back to encoding/json.
		raw, err := json.Marshal(t)
		if err != nil {
			b.WriteString("null")
			return
		}
		var back any
		if json.Unmarshal(raw, &back) != nil {
			b.WriteString("null")
			return
		}
		writeJS(b, back, nil, indent)
	}
}

func (o *argOrder) child(k string) *argOrder {
	if o == nil || o.children == nil {
		return nil
	}
	return o.children[k]
}

func (o *argOrder) orderKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	seen := map[string]bool{}
	if o != nil {
		for _, k := range o.keys {
			if _, ok := m[k]; ok && !seen[k] {
				keys = append(keys, k)
				seen[k] = true
			}
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(keys, rest...)
}

func writeJSString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// jsNumber formats f as JavaScript's Number.prototype.toString does.
func jsNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1e+21, 1.5e-07
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[:1]
	digits := strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}
