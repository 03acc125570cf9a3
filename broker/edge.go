package broker

import (
	"fmt"
	"net/http"
)

// checkHost answers 421 to a request whose Host the broker does not
// answer for, before any other handler runs: a web page that rebinds its
// own domain to 127.0.0.1 sends its domain as Host, and so cannot read
// /metrics or anything else from a browser on this machine.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.Allows(r.Host) {
			writeProblem(w, r, s.logger, fmt.Errorf("%w: the broker does not answer for host %q; "+
				"add it to AllowedHosts (allowedHosts in the config file) if it is this broker's name",
				ErrMisdirected, r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}
