package cli

import (
	"log/slog"
	"runtime/debug"
	"strconv"
)

// The broker's own garbage-collection defaults, used unless GOGC or
// GOMEMLIMIT is set. Its live heap is a few MiB while each call allocates
// short-lived buffers (the MCP SDK's JSON decoders take 32 KiB each,
// several per call), so Go's GOGC=100 collected every few MiB: a third of
// an MCP read's time went to garbage collection. A higher GOGC collects
// less often; the soft limit makes it collect as before once the heap
// nears 128 MiB, well below the broker's RSS ceiling (256 MiB under the
// hostile load, docs/security.md), so memory stays bounded whatever the load.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 128 << 20
)

// tuneGC applies the defaults the environment does not override and logs
// what the broker runs with.
func (c *CLI) tuneGC(logger *slog.Logger) {
	gogc := c.Getenv("GOGC")
	if gogc == "" {
		debug.SetGCPercent(defaultGCPercent)
		gogc = strconv.Itoa(defaultGCPercent)
	}
	if c.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	// A negative limit only reads the current one.
	logger.Debug("garbage collection", "gogc", gogc, "memory_limit_bytes", debug.SetMemoryLimit(-1))
}
