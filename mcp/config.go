package mcp

import (
	"errors"
	"time"

	"github.com/wsbroker/wsbroker/workspaces"
)

// Defaults used where a Config field is zero.
const (
	DefaultMaxSessionsPerTenant = 32
	DefaultIdleTimeout          = 30 * time.Minute
	// DefaultMaxBatchMessages is the HTTP batch route's default cap
	// (broker.DefaultMaxBatchCalls), which the broker passes on.
	DefaultMaxBatchMessages = 128
)

// Config configures a Server. The zero value of every field means its
// default.
type Config struct {
	// MaxSessionsPerTenant bounds a tenant's open MCP sessions, over both
	// endpoints; a new session past it is refused with 429.
	MaxSessionsPerTenant int
	// IdleTimeout closes a session that received no request for that long.
	IdleTimeout time.Duration
	// MaxBatchMessages bounds the messages of one JSON-RPC batch (protocol
	// 2025-03-26 and earlier); a longer batch is refused whole with a
	// JSON-RPC error. Each tools/call of a batch counts against the
	// tenant's rate and concurrency as its own request would.
	MaxBatchMessages int
	// KeepWorkspaces keeps the workspaces a /v1/mcp session created when the
	// session ends; by default they are deleted with it.
	KeepWorkspaces bool
}

// Profile is a workspace spec: a backend ("" is the broker's default)
// and that backend's create options. The named ones a /v1/mcp client
// picks with ?profile=NAME are the workspace service's
// (workspaces.Config.Profiles), the same the HTTP create route takes.
type Profile = workspaces.Profile

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxSessionsPerTenant == 0 {
		c.MaxSessionsPerTenant = DefaultMaxSessionsPerTenant
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxBatchMessages == 0 {
		c.MaxBatchMessages = DefaultMaxBatchMessages
	}
	return c
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	switch {
	case c.MaxSessionsPerTenant < 0:
		return errors.New("mcp: the session cap must be positive")
	case c.IdleTimeout < 0:
		return errors.New("mcp: the idle timeout must be positive")
	case c.MaxBatchMessages < 0:
		return errors.New("mcp: the batch cap must be positive")
	}
	return nil
}
