package docker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Ping reports whether the engine answers. A closed backend or an engine
// that does not answer is ErrUnavailable.
func (b *Backend) Ping(ctx context.Context) error {
	const op = "docker.Ping"
	if err := b.usable(); err != nil {
		return err
	}
	if _, err := b.api.Ping(ctx); err != nil {
		return opsapi.E(op, "", opsapi.ErrUnavailable, fmt.Errorf("the engine does not answer: %w", err))
	}
	return nil
}

// Network returns the network a create's options name, "" when they name
// none (Config.Network then applies) or do not parse.
func (b *Backend) Network(options json.RawMessage) string {
	var o createOptions
	_ = json.Unmarshal(options, &o) // shape errors are Create's to report
	return o.Network
}

// WithNetwork returns options with "network" set, the other fields kept
// as they are.
func (b *Backend) WithNetwork(options json.RawMessage, network string) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(options) > 0 {
		if err := json.Unmarshal(options, &fields); err != nil {
			return nil, opsapi.E("docker.WithNetwork", "", opsapi.ErrInvalid, fmt.Errorf("options: %w", err))
		}
		if fields == nil { // "null"
			fields = map[string]json.RawMessage{}
		}
	}
	fields["network"], _ = json.Marshal(network)
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, opsapi.E("docker.WithNetwork", "", opsapi.ErrInvalid, err)
	}
	return out, nil
}

var (
	_ opsapi.Pinger         = (*Backend)(nil)
	_ opsapi.NetworkChooser = (*Backend)(nil)
	_ opsapi.CreationTimer  = (*Workspace)(nil)
)
