package docker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/docker/docker/api/types/container"
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
)

// killHeadroom is how many processes pidsHeadroom lends: enough for the
// runtime to start one exec (runc and the shell it becomes).
const killHeadroom = 32

// pidsHeadroom raises the container's pids limit by killHeadroom so that
// the kill sweep's exec can start in a container a fork bomb has filled,
// and returns how to put the limit back. The bomb could take the room
// too, but its processes sleep in bash's fork retry for seconds; the
// sweep, once started, stops them all before it kills.
func (x *box) pidsHeadroom(ctx context.Context) (func(), error) {
	info, err := x.b.api.ContainerInspect(ctx, x.cid)
	if err != nil {
		return nil, x.engineErr("docker.kill", err)
	}
	old := info.HostConfig.PidsLimit
	if old == nil || *old <= 0 {
		return func() {}, nil // no limit, nothing to lend
	}
	more := *old + killHeadroom
	if err := x.setPidsLimit(ctx, more); err != nil {
		return nil, err
	}
	x.logger.Warn("lent the kill sweep pids headroom", "limit", *old, "lent", killHeadroom)
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectTimeout)
		defer cancel()
		if err := x.setPidsLimit(ctx, *old); err != nil {
			x.logger.Error("restoring the pids limit after a kill failed", "limit", *old, "err", err)
		}
	}, nil
}

func (x *box) setPidsLimit(ctx context.Context, n int64) error {
	_, err := x.b.api.ContainerUpdate(ctx, x.cid, container.UpdateConfig{Resources: container.Resources{PidsLimit: &n}})
	if err != nil {
		return x.engineErr("docker.kill", err)
	}
	return nil
}
