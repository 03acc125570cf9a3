package remote_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/remote"
)

func TestLower(t *testing.T) {
	for _, c := range []struct {
		asked, want float64
		err         string
	}{
		{0, 2, ""},
		{1.5, 1.5, ""},
		{2, 2, ""},
		{3, 3, "limits.cpus 3 must be between 0.01 and 2"},
		{0.001, 0.001, "limits.cpus 0.001 must be between 0.01 and 2"},
	} {
		have := 2.0
		err := remote.Lower("limits.cpus", c.asked, 0.01, &have)
		if have != c.want || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("Lower(%v): %v, %v; want %v, %q", c.asked, have, err, c.want, c.err)
		}
	}
}
