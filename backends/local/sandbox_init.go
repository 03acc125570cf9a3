package local

import "github.com/wsbroker/wsbroker/backends/local/sandbox"

// The broker re-executes itself as the sandbox launcher (see package
// sandbox); such a process is taken over here, before main, in every
// binary that can run local workspaces, tests included.
func init() { sandbox.Main() }
