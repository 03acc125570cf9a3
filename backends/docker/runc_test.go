package docker

import (
	"strings"
	"testing"
)

func TestCheckRunc(t *testing.T) {
	for _, c := range []struct {
		version, commit string
		fixed           bool
		says            string
	}{
		{"1.1.12", "v1.1.12-0-g51d5e94", true, "carries the fix"},
		{"1.2.5", "v1.2.5-0-g59923ef", true, "carries the fix"},
		{"v1.1.13", "", true, "carries the fix"},
		{"1.1.11", "v1.1.11-0-g4bccb38", false, "vulnerable"},
		{"1.0.0-rc93", "", false, "vulnerable"},
		// Debian's engine: the package revision is in GitCommit.
		{"1.1.5+ds1", "1.1.5+ds1-1+deb12u1", true, "Debian's security update"},
		{"1.1.5+ds1", "1.1.5+ds1-1", false, "without a security update"},
		{"1.0.0~rc93+ds1", "1.0.0~rc93+ds1-5+deb11u3", true, "backported"},
		{"1.0.0~rc93+ds1", "1.0.0~rc93+ds1-5+deb11u2", false, "+deb11u3"},
		// Another distribution: cannot be verified, warned with advice.
		{"1.1.7-0ubuntu1~22.04.2", "", false, "may carry a backported fix"},
		{"garbage", "", false, "not recognised"},
	} {
		v := checkRunc(c.version, c.commit)
		if v.Fixed != c.fixed || !strings.Contains(v.Message, c.says) {
			t.Errorf("checkRunc(%q, %q) = %+v, want fixed=%v saying %q", c.version, c.commit, v, c.fixed, c.says)
		}
	}
}
