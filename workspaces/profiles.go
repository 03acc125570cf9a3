package workspaces

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Profile is a named workspace spec configured on the broker: a backend
// ("" is the default) and that backend's create options. A create names
// it instead of a backend and options, on every front-end (HTTP, MCP).
type Profile struct {
	Backend string          `json:"backend,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
}

// validateProfiles reports the first unusable profile.
func validateProfiles(ps map[string]Profile) error {
	for name, p := range ps {
		if name == "" {
			return errors.New("broker: a profile has an empty name")
		}
		if len(p.Options) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(p.Options, &obj); err != nil {
				return fmt.Errorf("broker: profile %q: options must be a JSON object: %w", name, err)
			}
		}
	}
	return nil
}

// Profile returns the named profile; an unknown name is ErrInvalid.
// Creating from it goes through Create, so the tenant's backends,
// images and quota apply to what it resolves to.
func (s *Service) Profile(name string) (Profile, error) {
	p, ok := s.cfg.Profiles[name]
	if !ok {
		return Profile{}, opsapi.E("create", "", opsapi.ErrInvalid, fmt.Errorf("no profile %q is configured", name))
	}
	return p, nil
}

// CreateSpec resolves a create's spec: the named profile, or the backend
// and options as given. Naming a profile together with a backend or
// options is ErrInvalid, as is an unknown profile.
func (s *Service) CreateSpec(profile, backend string, options json.RawMessage) (Profile, error) {
	if profile == "" {
		return Profile{Backend: backend, Options: options}, nil
	}
	if backend != "" || (len(options) > 0 && string(options) != "null") {
		return Profile{}, opsapi.E("create", "", opsapi.ErrInvalid,
			fmt.Errorf("profile %q was given with a backend or options: give the profile or them, not both", profile))
	}
	return s.Profile(profile)
}
