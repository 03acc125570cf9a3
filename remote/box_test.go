package remote_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/wsbroker/wsbroker/remote"
)

// boxConfig is a backend's Config as docker's and kubernetes' embed Box.
type boxConfig struct {
	Host       string `json:"host" yaml:"host"`
	remote.Box `yaml:",inline"`
}

// TestBoxKeysStayTopLevel: the embedded settings read and write as the
// configuration's own keys, in YAML (strictly) and JSON.
func TestBoxKeysStayTopLevel(t *testing.T) {
	const doc = "host: h\ndefaultImage: img\nallowedImages: [\"a/*\"]\nuser: \"7:7\"\nmemory: 1GiB\ncpus: 1.5\ndisk: 64MiB\ntmpfsSize: 8MiB\n"
	var c boxConfig
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Host != "h" || c.DefaultImage != "img" || len(c.AllowedImages) != 1 || c.User != "7:7" ||
		c.Memory != 1<<30 || c.CPUs != 1.5 || c.Disk != 64<<20 || c.TmpfsSize != 8<<20 {
		t.Fatalf("decoded %+v", c)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var flat map[string]any
	if err := json.Unmarshal(out, &flat); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"host", "defaultImage", "allowedImages", "user", "memory", "cpus", "disk", "tmpfsSize"} {
		if _, ok := flat[k]; !ok {
			t.Errorf("JSON %s lacks the top-level key %q", out, k)
		}
	}
}

func TestBoxImage(t *testing.T) {
	b := remote.Box{DefaultImage: "d:1", AllowedImages: []string{"ok/*"}}
	for _, tc := range []struct{ asked, want, err string }{
		{"", "d:1", ""},
		{"d:1", "d:1", ""},
		{"ok/x", "ok/x", ""},
		{"bad/x", "bad/x", `image "bad/x" is not allowed (allowedImages)`},
	} {
		got, err := b.Image(tc.asked)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("Image(%q) = %q, %v; want %q, %q", tc.asked, got, err, tc.want, tc.err)
		}
	}
}

func TestBoxDefaultsAndProblems(t *testing.T) {
	got := remote.Box{Memory: 1 << 30, Disk: 5}.WithDefaults(remote.NewBox())
	want := remote.NewBox()
	want.Memory, want.Disk = 1<<30, 5
	if got.DefaultImage != want.DefaultImage || got.User != want.User || got.Memory != want.Memory ||
		got.CPUs != want.CPUs || got.Disk != want.Disk || got.TmpfsSize != want.TmpfsSize {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
	errs := remote.Box{AllowedImages: []string{"["}}.ImageProblems()
	if len(errs) != 2 || errs[0].Error() != "defaultImage is required" || !strings.Contains(errs[1].Error(), `bad pattern "["`) {
		t.Errorf("ImageProblems = %v", errs)
	}
	if errs := remote.NewBox().ImageProblems(); len(errs) != 0 {
		t.Errorf("the defaults have problems: %v", errs)
	}
}
