package httpguard

import "testing"

// TestCheckJSON: one value, bounded depth, no duplicate or case-folded
// keys, and the message names where the body went wrong.
func TestCheckJSON(t *testing.T) {
	ok := []string{`{}`, `[]`, `1`, `"s"`, `null`, ` {"a":{"b":[{"c":1},{"c":2}]},"b":2} `, `{"a":[{"x":1}],"b":[{"x":1}]}`}
	for _, s := range ok {
		if err := CheckJSON([]byte(s)); err != nil {
			t.Errorf("CheckJSON(%s): %v", s, err)
		}
	}
	bad := map[string]string{
		`{"a":1,"a":2}`:              `duplicate key "a" in the top-level object at offset 7`,
		`{"a":[{"b":1,"b":1}]}`:      `duplicate key "b" in a[0] at offset 13`,
		`{"a":{"b":{"c":1, "c":1}}}`: `duplicate key "c" in a.b at offset 18`,
		`[1,2`:                       `malformed JSON at offset 4: unexpected end of input`,
		`{"a":1}x`:                   `unexpected data after the JSON value at offset 7`,
		`1 2`:                        `unexpected data after the JSON value at offset 1`,
		"  \n":                       `request body is empty; expected JSON`,
		`{"a":1,}`:                   `malformed JSON at offset 7: invalid character '}' looking for beginning of object key string`,
		`{"k":1,"\u212a":2}`:         `keys "k" and "K" in the top-level object differ only in case at offset 7; JSON keys are matched without regard to case, so both would set the same field`,
		`{"a":{"Ab":1,"aB":2}}`:      `keys "Ab" and "aB" in a differ only in case at offset 13; JSON keys are matched without regard to case, so both would set the same field`,
		`[[[`:                        `malformed JSON at offset 3: unexpected end of input`,
		`{"a":"\x"}`:                 `malformed JSON at offset 6: invalid character 'x' in string escape code`,
	}
	for in, want := range bad {
		err := CheckJSON([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("CheckJSON(%q) = %v, want %s", in, err, want)
		}
	}
}
