package execconf_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wsbroker/wsbroker/internal/execconf"
)

// host embeds the block as a backend's Config does.
type host struct {
	Name          string `json:"name" yaml:"name"`
	execconf.Exec `yaml:",inline"`
}

// The block's keys stay flat in the embedding config, in YAML and JSON.
func TestKeysStayFlat(t *testing.T) {
	var y host
	if err := yaml.Unmarshal([]byte("name: a\nkillGrace: 3s\nrgPath: /x/rg\n"), &y); err != nil {
		t.Fatal(err)
	}
	var j host
	if err := json.Unmarshal([]byte(`{"name":"a","killGrace":3000000000,"rgPath":"/x/rg"}`), &j); err != nil {
		t.Fatal(err)
	}
	for _, h := range []host{y, j} {
		if h.Name != "a" || h.KillGrace != 3*time.Second || h.RgPath != "/x/rg" {
			t.Errorf("got %+v", h)
		}
	}
}

func TestDefaultsAndProblems(t *testing.T) {
	e := execconf.Exec{KillGrace: time.Second}.WithDefaults()
	want := execconf.New()
	want.KillGrace = time.Second
	if e != want {
		t.Fatalf("WithDefaults = %+v, want %+v", e, want)
	}
	if p := e.Problems(); len(p) != 0 {
		t.Fatalf("Problems = %v", p)
	}
	bad := execconf.Exec{DrainIdle: time.Second, MaxDrain: time.Millisecond, Shell: "bash"}
	var msgs []string
	for _, err := range bad.Problems() {
		msgs = append(msgs, err.Error())
	}
	got := strings.Join(msgs, "\n")
	wantMsgs := "killGrace must be positive, got 0s\n" +
		"maxDrain (1ms) is shorter than drainIdle (1s)\n" +
		`shell "bash" is not an absolute path` + "\n" +
		"rgPath is required"
	if got != wantMsgs {
		t.Fatalf("Problems:\n%s\nwant:\n%s", got, wantMsgs)
	}
}
