// Package overhttp runs the backend conformance suite (package
// backendtest) through the wire: each case's workspace is created and
// used with the Go client against the real broker's HTTP handler serving
// the backend, so errors, streaming and process killing must cross HTTP
// unchanged.
//
// It lives apart from backendtest so that backendtest imports neither
// the broker nor the client, and backends can run their own suite
// without either.
package overhttp
