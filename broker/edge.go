package broker

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// hostSet is the host names the broker answers for, lower-case, without
// port or brackets.
type hostSet struct {
	names map[string]bool
	any   bool // "*": no check
	ips   bool // listening on every address: any IP literal is fine
}

// newHostSet builds the accepted hosts from the configured list, or the
// default: the listen address's host, localhost, 127.0.0.1 and ::1. A
// DNS-rebinding page reaches the broker under its own domain name, never
// under an IP literal, so when the broker listens on every address
// (0.0.0.0, ::) any IP literal is also accepted.
func newHostSet(allowed []string, listen string) hostSet {
	hs := hostSet{names: map[string]bool{}}
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

func (hs hostSet) allows(host string) bool {
	if hs.any {
		return true
	}
	h := normalHost(host)
	return hs.names[h] || (hs.ips && net.ParseIP(h) != nil)
}

// checkHost answers 421 to a request whose Host the broker does not
// answer for, before any other handler runs: a web page that rebinds its
// own domain to 127.0.0.1 sends its domain as Host, and so cannot read
// /metrics or anything else from a browser on this machine.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.allows(r.Host) {
			writeProblem(w, r, s.logger, fmt.Errorf("%w: the broker does not answer for host %q; "+
				"add it to AllowedHosts (allowedHosts in the config file) if it is this broker's name",
				ErrMisdirected, r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}
