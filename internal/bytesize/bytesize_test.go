package bytesize_test

import (
	"encoding/json"
	"testing"

	"github.com/wsbroker/wsbroker/internal/bytesize"
)

func TestSize(t *testing.T) {
	for in, want := range map[string]bytesize.Size{`1024`: 1024, `"512MiB"`: 512 << 20, `"2g"`: 2 << 30, `"1.5GB"`: 3 << 29, `" 1k "`: 1024} {
		var s bytesize.Size
		if err := json.Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("%s: %d %v, want %d", in, s, err, want)
		}
	}
	for _, in := range []string{`"lots"`, `true`, `"-"`} {
		var s bytesize.Size
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("%s: accepted as %d", in, s)
		}
	}
	if got := bytesize.Size(2 << 30).String(); got != "2GiB" {
		t.Errorf("String: %q", got)
	}
}
