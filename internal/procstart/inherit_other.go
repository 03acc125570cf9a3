//go:build !linux

package procstart

// closeInherited does nothing off Linux: Go opens its own descriptors
// close-on-exec, but one the broker inherited reaches its children there.
func closeInherited() error { return nil }
