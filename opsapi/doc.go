// Package opsapi is the contract between the broker's tools and its backends.
//
// # Overview
//
// AI coding agents act through seven tools: read, write, edit, bash, grep,
// find and ls. The pi coding agent defines one small Operations interface per
// tool so that a host can move the tool's effects elsewhere; this package is
// the Go form of those interfaces, plus the two abilities pi lacks and its
// users asked for: a server-side search (ripgrep runs where the files are)
// and a glob that honours .gitignore.
//
// Every backend (local, docker, ssh, kubernetes, the HTTP client) implements these
// interfaces, and the tools in package tools are written once over them.
//
// # Paths
//
// Paths are POSIX paths in the workspace's own namespace, whatever the host
// OS: absolute, or relative to the workspace root. Backends that confine
// operations to the root refuse anything outside it with ErrPermission.
//
// # Errors
//
// Every error a backend returns can be classified with errors.Is against the
// sentinel kinds (ErrNotExist, ErrPermission, ...). Backends build them with E
// so that the operation and path travel with the error; Classify maps
// operating-system errors to kinds.
//
// This package imports only the standard library.
package opsapi
