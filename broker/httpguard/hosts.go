package httpguard

import (
	"net"
	"strings"
)

// HostSet is the host names a server answers for, lower-case, without
// port or brackets.
type HostSet struct {
	names map[string]bool
	any   bool // "*": no check
	ips   bool // listening on every address: any IP literal is fine
}

// NewHostSet builds the accepted hosts from the configured list, or the
// default: the listen address's host, localhost, 127.0.0.1 and ::1. A
// DNS-rebinding page reaches the broker under its own domain name, never
// under an IP literal, so when the broker listens on every address
// (0.0.0.0, ::) any IP literal is also accepted.
func NewHostSet(allowed []string, listen string) HostSet {
	hs := HostSet{names: map[string]bool{}}
	if len(allowed) == 0 {
		allowed = []string{"localhost", "127.0.0.1", "::1"}
		host, _, err := net.SplitHostPort(listen)
		if err != nil {
			host = listen
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			hs.ips = true
		} else {
			allowed = append(allowed, host)
		}
	}
	for _, h := range allowed {
		if h == "*" {
			hs.any = true
		}
		hs.names[normalHost(h)] = true
	}
	return hs
}

// normalHost strips a port and IPv6 brackets and lower-cases the name,
// without its trailing dot.
func normalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// Allows reports whether a request's Host header is one of the set.
func (hs HostSet) Allows(host string) bool {
	if hs.any {
		return true
	}
	h := normalHost(host)
	return hs.names[h] || (hs.ips && net.ParseIP(h) != nil)
}
