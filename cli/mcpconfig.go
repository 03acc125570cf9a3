package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wsbroker/wsbroker/mcp"
	"github.com/wsbroker/wsbroker/workspaces"
)

// mcpConfig is the config file's mcp section: the MCP endpoints'
// limits (package mcp's Config, in YAML) and, in their older place,
// the broker's profiles.
type mcpConfig struct {
	// Profiles is the older place of the top-level profiles (see
	// profilesOf), still read: the two are merged.
	Profiles map[string]mcpProfile `yaml:"profiles"`
	// MaxSessionsPerTenant bounds a tenant's open MCP sessions (default 32).
	MaxSessionsPerTenant int `yaml:"maxSessionsPerTenant"`
	// IdleTimeout closes an idle MCP session (default 30m).
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// KeepWorkspaces keeps a /v1/mcp session's workspaces when it ends.
	KeepWorkspaces bool `yaml:"keepWorkspaces"`
}

// mcpProfile is one named workspace spec: a backend and its options.
// They are the broker's (workspaces.Profile): POST /v1/workspaces and
// the MCP endpoints both take one by name.
type mcpProfile struct {
	Backend string         `yaml:"backend"`
	Options map[string]any `yaml:"options"`
}

// config converts the section into package mcp's Config and validates it;
// a nil section is the defaults. Its profiles are profilesOf's.
func (c *mcpConfig) config() (mcp.Config, error) {
	if c == nil {
		return mcp.Config{}, nil
	}
	out := mcp.Config{MaxSessionsPerTenant: c.MaxSessionsPerTenant, IdleTimeout: c.IdleTimeout,
		KeepWorkspaces: c.KeepWorkspaces}
	if err := out.Validate(); err != nil {
		return mcp.Config{}, err
	}
	return out, nil
}

// profilesOf converts the config's profiles, top-level profiles: and the
// older mcp.profiles: merged; a name in both is an error.
func profilesOf(cfg serveConfig) (map[string]workspaces.Profile, error) {
	out := map[string]workspaces.Profile{}
	add := func(where string, ps map[string]mcpProfile) error {
		for name, p := range ps {
			if name == "" {
				return fmt.Errorf("%s: a profile has an empty name", where)
			}
			if _, dup := out[name]; dup {
				return fmt.Errorf("profile %q is configured both in profiles and in mcp.profiles: keep one", name)
			}
			wp := workspaces.Profile{Backend: p.Backend}
			if len(p.Options) > 0 {
				b, err := json.Marshal(p.Options)
				if err != nil {
					return fmt.Errorf("%s: profile %q: options: %w", where, name, err)
				}
				wp.Options = b
			}
			out[name] = wp
		}
		return nil
	}
	if cfg.Profiles != nil {
		if err := add("profiles", *cfg.Profiles); err != nil {
			return nil, err
		}
	}
	if cfg.MCP != nil {
		if err := add("mcp.profiles", cfg.MCP.Profiles); err != nil {
			return nil, err
		}
	}
	return out, nil
}
