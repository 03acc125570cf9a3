package remote_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/remote"
)

func TestDecodeOptions(t *testing.T) {
	type opts struct {
		Image string `json:"image"`
	}
	for _, tc := range []struct {
		raw, want, err string
	}{
		{raw: ``}, {raw: ` null `}, {raw: `{"image":"a"}`, want: "a"},
		{raw: `{"imag":"a"}`, err: "unknown field"},
		{raw: `{"image":"a"} {}`, err: "trailing data"},
		{raw: `[1]`, err: "options: "},
	} {
		var o opts
		err := remote.DecodeOptions(json.RawMessage(tc.raw), &o)
		if tc.err == "" && (err != nil || o.Image != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("DecodeOptions(%q) = %+v, %v; want %q, error %q", tc.raw, o, err, tc.want, tc.err)
		}
	}
}

func TestImageAllowed(t *testing.T) {
	allowed := []string{"wsbroker/*"}
	for image, want := range map[string]bool{"base:1": true, "wsbroker/x:2": true, "other/x": false, "wsbroker/a/b": false} {
		if got := remote.ImageAllowed(image, "base:1", allowed); got != want {
			t.Errorf("ImageAllowed(%q) = %v", image, got)
		}
	}
	if !remote.ImageAllowed("anything", "base:1", []string{"*"}) {
		t.Error(`"*" does not allow every image`)
	}
	if errs := remote.ImagePatternProblems([]string{"ok/*", "", "bad["}); len(errs) != 2 {
		t.Errorf("ImagePatternProblems: %v, want 2", errs)
	}
}
