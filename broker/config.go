package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/mcp"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
	"github.com/wsbroker/wsbroker/workspaces/bgproc"
)

// Defaults used where a Config field is zero.
const (
	DefaultAddr              = "127.0.0.1:8722"
	DefaultBackend           = "local"
	DefaultMaxJSONBody       = 1 << 20   // 1 MiB
	DefaultMaxToolBody       = 16 << 20  // 16 MiB: a write tool call carries a whole file
	DefaultMaxUploadBytes    = 256 << 20 // 256 MiB
	DefaultMaxArchiveBytes   = 1 << 30   // 1 GiB of file content in one tar
	DefaultMaxArchiveEntries = 100_000
	DefaultMaxHeaderBytes    = 64 << 10 // 64 KiB
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyReadTimeout   = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultShutdownGrace     = 10 * time.Second
	DefaultMaxBatchCalls     = 128
	// Requests that fail authentication, per peer address: a burst of
	// 20, then one a second; at most 4096 peers are tracked.
	DefaultUnauthPerSecond = 1.0
	DefaultUnauthBurst     = 20
	DefaultUnauthPeers     = 4096
	// Over all peers, requests that fail authentication are recorded one
	// by one up to a burst of 100, then 5 a second; the rest are counted
	// in a summary record every 10 seconds.
	DefaultUnauthAuditPerSecond = 5.0
	DefaultUnauthAuditBurst     = 100
	DefaultUnauthSummaryEvery   = 10 * time.Second
	DefaultBodyIdleTimeout      = 30 * time.Second
	DefaultMinBodyRate          = 4 << 10 // 4 KiB/s
	DefaultMaxConnsPerPeer      = 512
	// DefaultMaxConns is the cap on open connections when the process's
	// file descriptor limit allows it; below, half that limit.
	DefaultMaxConns = 4096
	// DefaultMaxBodyBytesInFlight is two tool calls of the largest size:
	// with the copies decoding makes, the broker's heap stays well under
	// 256 MiB however many clients send large bodies at once.
	DefaultMaxBodyBytesInFlight = 32 << 20 // 32 MiB
)

// Config configures a Server. The zero value of every field means its
// default; Tokens has none and must hold at least one token.
type Config struct {
	// Addr is the listen address of ListenAndServe.
	Addr string
	// Tokens are the accepted bearer tokens. Only their SHA-256 hashes are
	// kept; they are never logged.
	Tokens []string
	// Tenants, when set, replaces Tokens: each token belongs to a tenant
	// with its own workspaces, quotas and policy. With only Tokens, they
	// form one admin tenant named "default".
	Tenants *tenant.Registry
	// Audit receives one record per request and per tool call; nil keeps
	// no audit trail.
	Audit *audit.Log
	// OwnersFile records which tenant owns each workspace, so that
	// ownership survives a restart; empty keeps it in memory (adopted
	// workspaces then belong to the first tenant).
	OwnersFile string
	// EnvFile keeps each workspace's environment across restarts (mode
	// 0600: it holds secrets); empty keeps it in memory only.
	EnvFile string
	// ProcessDir holds the logs of background processes (emptied at
	// start); empty is a new directory in the OS's temp dir.
	ProcessDir string
	// Processes bounds each workspace's background processes: the size
	// of each one's log, how many it keeps, what its stdin queues.
	Processes bgproc.Limits
	// TLS, when set, makes Serve speak HTTPS; with ClientAuth set to
	// tls.RequireAndVerifyClientCert and ClientCAs, only clients with a
	// certificate from those CAs get to send a request at all (mTLS).
	TLS *tls.Config
	// DefaultBackend names the backend of a workspace created without one.
	DefaultBackend string
	// MaxJSONBody bounds JSON request bodies (workspace, glob, search,
	// exec, batch bodies get 413 past it, before being buffered).
	MaxJSONBody int64
	// MaxToolBody bounds the body of a single tool call and of a batch,
	// whose arguments may carry a whole file for the write tool.
	MaxToolBody int64
	// MaxUploadBytes bounds a PUT /files body; past it the upload fails
	// with 413 and the old file stays.
	MaxUploadBytes int64
	// MaxArchiveBytes and MaxArchiveEntries bound one tar in or out of a
	// workspace (PUT and GET /archive): the bytes of its files' content
	// and its entries. The body of a PUT is bounded by both together.
	MaxArchiveBytes   int64
	MaxArchiveEntries int
	// MaxHeaderBytes bounds request headers (431 past it).
	MaxHeaderBytes int
	// ReadHeaderTimeout closes connections whose headers are too slow
	// (slowloris).
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds the time to read a JSON body.
	BodyReadTimeout time.Duration
	// BodyIdleTimeout ends a request whose body (any body, uploads
	// included) stalls this long; it is also the grace before MinBodyRate
	// applies.
	BodyIdleTimeout time.Duration
	// MinBodyRate is the slowest a body may arrive, in bytes per second
	// on average after BodyIdleTimeout: a body trickled byte by byte
	// times out instead of holding a connection and a file descriptor.
	MinBodyRate int64
	// MaxConns caps the connections Serve holds open at once; more wait
	// in the listen backlog. Default: 4096, or half the process's file
	// descriptor limit when that is lower.
	MaxConns int
	// MaxConnsPerPeer caps the connections from one IP address; past it
	// a new connection is closed at once.
	MaxConnsPerPeer int
	// IdleTimeout closes idle keep-alive connections.
	IdleTimeout time.Duration
	// ShutdownGrace is how long Serve lets in-flight requests finish after
	// its context ends; running commands are killed at once.
	ShutdownGrace time.Duration
	// MaxBatchCalls bounds the calls of one batch.
	MaxBatchCalls int
	// UnauthPerSecond and UnauthBurst rate-limit, per peer address, the
	// requests that fail authentication: within them a 401 (audited),
	// past them a 429 with nothing written to the audit trail.
	// UnauthPeers bounds the peers tracked.
	UnauthPerSecond float64
	UnauthBurst     int
	UnauthPeers     int
	// UnauthAudit is the trail of requests that fail authentication,
	// kept apart from Audit so that their volume never rotates tenants'
	// records out of it; nil writes them to Audit.
	UnauthAudit *audit.Log
	// UnauthAuditPerSecond and UnauthAuditBurst are the budget, over all
	// peers, of those requests recorded one by one; past it each is
	// only counted, and a summary record with the count is written
	// UnauthSummaryEvery after the first one counted.
	UnauthAuditPerSecond float64
	UnauthAuditBurst     int
	UnauthSummaryEvery   time.Duration
	// MaxBodyBytesInFlight bounds the bytes of JSON and tool-call bodies
	// held in memory at once, over all requests; a body that would pass
	// it gets 503 with Retry-After, and nothing runs. At least
	// MaxToolBody and MaxJSONBody. (File uploads stream and do not count.)
	MaxBodyBytesInFlight int64
	// AllowedHosts are the Host header names the broker answers for (any
	// port); any other Host gets 421 before a handler runs, which stops
	// DNS rebinding. Empty means the listen address's host, localhost,
	// 127.0.0.1 and ::1 (and any IP literal when listening on every
	// address); "*" turns the check off.
	AllowedHosts []string
	// MCP configures the MCP endpoints (/v1/mcp and
	// /v1/workspaces/{id}/mcp): the session cap, idle expiry and
	// whether a session's workspaces outlive it.
	MCP mcp.Config
	// Profiles are named workspace specs (a backend and its options) a
	// create names instead: POST /v1/workspaces {"profile": NAME}, the
	// MCP endpoints' ?profile=NAME and workspace_create. The tenant's
	// backends, images and quota apply to what a profile resolves to.
	Profiles map[string]workspaces.Profile
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DefaultBackend == "" {
		c.DefaultBackend = DefaultBackend
	}
	if c.MaxJSONBody == 0 {
		c.MaxJSONBody = DefaultMaxJSONBody
	}
	if c.MaxToolBody == 0 {
		c.MaxToolBody = DefaultMaxToolBody
	}
	if c.MaxUploadBytes == 0 {
		c.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if c.MaxArchiveBytes == 0 {
		c.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if c.MaxArchiveEntries == 0 {
		c.MaxArchiveEntries = DefaultMaxArchiveEntries
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.BodyIdleTimeout == 0 {
		c.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if c.MinBodyRate == 0 {
		c.MinBodyRate = DefaultMinBodyRate
	}
	if c.MaxConns == 0 {
		c.MaxConns = defaultMaxConns()
	}
	if c.MaxConnsPerPeer == 0 {
		c.MaxConnsPerPeer = DefaultMaxConnsPerPeer
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.MaxBatchCalls == 0 {
		c.MaxBatchCalls = DefaultMaxBatchCalls
	}
	if c.UnauthPerSecond == 0 {
		c.UnauthPerSecond = DefaultUnauthPerSecond
	}
	if c.UnauthBurst == 0 {
		c.UnauthBurst = DefaultUnauthBurst
	}
	if c.UnauthPeers == 0 {
		c.UnauthPeers = DefaultUnauthPeers
	}
	if c.UnauthAuditPerSecond == 0 {
		c.UnauthAuditPerSecond = DefaultUnauthAuditPerSecond
	}
	if c.UnauthAuditBurst == 0 {
		c.UnauthAuditBurst = DefaultUnauthAuditBurst
	}
	if c.UnauthSummaryEvery == 0 {
		c.UnauthSummaryEvery = DefaultUnauthSummaryEvery
	}
	if c.MaxBodyBytesInFlight == 0 {
		c.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, c.MaxToolBody, c.MaxJSONBody)
	}
	return c
}

// Validate reports the first unusable field (after defaults apply).
func (c Config) Validate() error {
	c = c.withDefaults()
	if len(c.Tokens) == 0 && c.Tenants == nil {
		return errors.New("broker: at least one bearer token or a tenant registry is required")
	}
	for i, t := range c.Tokens {
		if t == "" {
			return fmt.Errorf("broker: token %d is empty", i)
		}
	}
	switch {
	case c.MaxJSONBody < 0, c.MaxToolBody < 0, c.MaxUploadBytes < 0, c.MaxArchiveBytes < 0, c.MaxArchiveEntries < 0:
		return errors.New("broker: body limits must be positive")
	case c.MaxHeaderBytes < 0:
		return errors.New("broker: MaxHeaderBytes must be positive")
	case c.ReadHeaderTimeout < 0, c.BodyReadTimeout < 0, c.IdleTimeout < 0, c.ShutdownGrace < 0, c.BodyIdleTimeout < 0:
		return errors.New("broker: timeouts must be positive")
	case c.MinBodyRate < 0, c.MaxConns < 0, c.MaxConnsPerPeer < 0:
		return errors.New("broker: MinBodyRate, MaxConns and MaxConnsPerPeer must be positive")
	case c.MaxBatchCalls < 0:
		return errors.New("broker: MaxBatchCalls must be positive")
	case c.UnauthPerSecond < 0, c.UnauthBurst < 0, c.UnauthPeers < 0:
		return errors.New("broker: UnauthPerSecond, UnauthBurst and UnauthPeers must be positive")
	case c.UnauthAuditPerSecond < 0, c.UnauthAuditBurst < 0, c.UnauthSummaryEvery < 0:
		return errors.New("broker: UnauthAuditPerSecond, UnauthAuditBurst and UnauthSummaryEvery must be positive")
	case c.MaxBodyBytesInFlight < max(c.MaxToolBody, c.MaxJSONBody):
		return fmt.Errorf("broker: MaxBodyBytesInFlight (%d) must hold at least one body of MaxToolBody (%d) and MaxJSONBody (%d)",
			c.MaxBodyBytesInFlight, c.MaxToolBody, c.MaxJSONBody)
	}
	if err := c.MCP.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}
