package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidateMessages(t *testing.T) {
	schema := json.RawMessage(`{
	  "type": "object",
	  "properties": {
	    "name": {"type": "string"},
	    "n": {"type": "integer"},
	    "on": {"type": "boolean"},
	    "list": {"type": "array", "minItems": 1, "items": {
	      "type": "object",
	      "properties": {"a": {"type": "string"}},
	      "required": ["a"],
	      "additionalProperties": false
	    }}
	  },
	  "required": ["name", "list"]
	}`)
	cases := []struct {
		args string
		want []string // problem lines; nil = valid
	}{
		{`{"name":"x","list":[{"a":"y"}]}`, nil},
		{`{"name":1,"list":[{"a":"y"}]}`, nil}, // 1 -> "1"
		{`{"name":"x","n":"3","on":"false","list":[{"a":2}]}`, nil},
		{`{"name":"x","n":2.5,"list":[{"a":"y"}]}`, []string{"  - n: must be integer"}},
		{`{"name":"x","on":"yes","list":[{"a":"y"}]}`, []string{"  - on: must be boolean"}},
		{`{"name":"x","list":[]}`, []string{"  - list: must NOT have fewer than 1 items"}},
		{`{"name":"x","list":{}}`, []string{"  - list: must be array"}},
		{`{"name":"x","list":[{}]}`, []string{"  - list/0/a: must have required property 'a'"}},
		{`{"name":"x","list":[{"a":"y","b":1}]}`, []string{"  - list/0: must NOT have additional properties"}},
		{`{"name":null,"list":["s"]}`, []string{"  - name: must be string", "  - list/0: must be object"}},
		{`[]`, []string{"  - root: must be object"}},
	}
	for _, c := range cases {
		v, order := decodeArgs(json.RawMessage(c.args))
		_, err := validateArguments("t", schema, v, order)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: unexpected error %v", c.args, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error, want %q", c.args, c.want)
			continue
		}
		msg := err.Error()
		head, _, _ := strings.Cut(msg, "\n\nReceived arguments:\n")
		want := "Validation failed for tool \"t\":\n" + strings.Join(c.want, "\n")
		if head != want {
			t.Errorf("%s:\n got %q\nwant %q", c.args, head, want)
		}
	}
}

func TestValidateReturnsCoercedCopy(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`)
	v, order := decodeArgs(json.RawMessage(`{"n":"5","z":true}`))
	got, err := validateArguments("t", schema, v, order)
	if err != nil {
		t.Fatal(err)
	}
	if got.(map[string]any)["n"] != float64(5) {
		t.Errorf("n = %#v, want 5", got.(map[string]any)["n"])
	}
	if v.(map[string]any)["n"] != "5" {
		t.Error("coercion changed the received arguments")
	}
}

func TestStringifyJS(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":{"y":[],"x":{}}}`, "{\n  \"b\": 1,\n  \"a\": {\n    \"y\": [],\n    \"x\": {}\n  }\n}"},
		{`1e21`, "1e+21"},
		{`0.0000001`, "1e-7"},
		{`123456789012`, "123456789012"},
		{`-0.5`, "-0.5"},
		{`"<a&b>\u2028\u0001\"\\"`, "\"<a&b>\u2028\\u0001\\\"\\\\\""},
		{`null`, "null"},
		{`{"k":1,"k":2}`, "{\n  \"k\": 2\n}"},
	}
	for _, c := range cases {
		v, order := decodeArgs(json.RawMessage(c.in))
		if got := stringifyJS(v, order); got != c.want {
			t.Errorf("stringify(%s) = %q, want %q", c.in, got, c.want)
		}
	}
	// Keys a shim adds come after the received ones, sorted.
	v, order := decodeArgs(json.RawMessage(`{"z":1}`))
	m := v.(map[string]any)
	m["b"], m["a"] = true, false
	if got, want := stringifyJS(m, order), "{\n  \"z\": 1,\n  \"a\": false,\n  \"b\": true\n}"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAllToolSchemasParse(t *testing.T) {
	for _, d := range Definitions() {
		s, err := parseSchema(d.Parameters)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if len(s.propOrder) != len(s.Properties) {
			t.Errorf("%s: property order %v incomplete", d.Name, s.propOrder)
		}
	}
}
