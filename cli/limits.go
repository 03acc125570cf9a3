package cli

import (
	"time"

	"github.com/wsbroker/wsbroker/broker"
)

// httpLimits is the config file's http: section, the limits that hold
// against hostile clients (docs/security.md, "Hostile clients"). Zero
// fields keep broker.Config's defaults.
type httpLimits struct {
	// AllowedHosts are the Host header names answered; others get 421.
	AllowedHosts []string `yaml:"allowedHosts"`
	// MaxBodyBytesInFlight bounds the request-body bytes held at once.
	MaxBodyBytesInFlight int64 `yaml:"maxBodyBytesInFlight"`
	// BodyIdleTimeout ends a body that stalls this long.
	BodyIdleTimeout time.Duration `yaml:"bodyIdleTimeout"`
	// MinBodyRate is the slowest a body may arrive, in bytes per second.
	MinBodyRate int64 `yaml:"minBodyRate"`
	// MaxConns caps open connections; MaxConnsPerPeer those of one IP.
	MaxConns        int `yaml:"maxConns"`
	MaxConnsPerPeer int `yaml:"maxConnsPerPeer"`
}

// apply sets the section's fields on c; a nil section changes nothing.
func (h *httpLimits) apply(c *broker.Config) {
	if h == nil {
		return
	}
	c.AllowedHosts = h.AllowedHosts
	c.MaxBodyBytesInFlight = h.MaxBodyBytesInFlight
	c.BodyIdleTimeout = h.BodyIdleTimeout
	c.MinBodyRate = h.MinBodyRate
	c.MaxConns = h.MaxConns
	c.MaxConnsPerPeer = h.MaxConnsPerPeer
}
