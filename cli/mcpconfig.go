package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wsbroker/wsbroker/mcp"
)

// mcpConfig is the config file's mcp section: the MCP endpoints'
// profiles and limits (package mcp's Config, in YAML).
type mcpConfig struct {
	// Profiles are named workspace specs a /v1/mcp client picks with
	// ?profile=NAME.
	Profiles map[string]mcpProfile `yaml:"profiles"`
	// MaxSessionsPerTenant bounds a tenant's open MCP sessions (default 32).
	MaxSessionsPerTenant int `yaml:"maxSessionsPerTenant"`
	// IdleTimeout closes an idle MCP session (default 30m).
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// KeepWorkspaces keeps a /v1/mcp session's workspaces when it ends.
	KeepWorkspaces bool `yaml:"keepWorkspaces"`
}

// mcpProfile is one named workspace spec: a backend and its options.
type mcpProfile struct {
	Backend string         `yaml:"backend"`
	Options map[string]any `yaml:"options"`
}

// config converts the section into package mcp's Config and validates it;
// a nil section is the defaults.
func (c *mcpConfig) config() (mcp.Config, error) {
	if c == nil {
		return mcp.Config{}, nil
	}
	out := mcp.Config{MaxSessionsPerTenant: c.MaxSessionsPerTenant, IdleTimeout: c.IdleTimeout,
		KeepWorkspaces: c.KeepWorkspaces, Profiles: map[string]mcp.Profile{}}
	for name, p := range c.Profiles {
		mp := mcp.Profile{Backend: p.Backend}
		if len(p.Options) > 0 {
			b, err := json.Marshal(p.Options)
			if err != nil {
				return mcp.Config{}, fmt.Errorf("mcp profile %q: options: %w", name, err)
			}
			mp.Options = b
		}
		out.Profiles[name] = mp
	}
	if err := out.Validate(); err != nil {
		return mcp.Config{}, err
	}
	return out, nil
}
