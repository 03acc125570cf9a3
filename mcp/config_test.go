package mcp_test

import (
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/mcp"
)

// TestConfigDefaultsAndValidate: zero fields take their defaults, and
// each unusable field is refused.
func TestConfigDefaultsAndValidate(t *testing.T) {
	d := mcp.Config{}.WithDefaults()
	if d.MaxSessionsPerTenant != mcp.DefaultMaxSessionsPerTenant || d.IdleTimeout != mcp.DefaultIdleTimeout || d.KeepWorkspaces ||
		d.MaxBatchMessages != mcp.DefaultMaxBatchMessages {
		t.Fatalf("defaults: %+v", d)
	}
	cases := []struct {
		name string
		cfg  mcp.Config
		ok   bool
	}{
		{"zero", mcp.Config{}, true},
		{"set", mcp.Config{MaxSessionsPerTenant: 2, IdleTimeout: time.Minute, KeepWorkspaces: true}, true},
		{"negative cap", mcp.Config{MaxSessionsPerTenant: -1}, false},
		{"negative idle", mcp.Config{IdleTimeout: -time.Second}, false},
		{"negative batch cap", mcp.Config{MaxBatchMessages: -1}, false},
	}
	for _, c := range cases {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
