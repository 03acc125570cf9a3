// Command wsb-agent is the in-box agent (package agent): started once per
// remote workspace, it serves the workspace's file operations and commands
// over one multiplexed connection, and runs each command under a reaper
// of its own so that a kill reaches every descendant.
//
//	wsb-agent serve --socket PATH   TLS on a Unix socket; its keys come as one JSON line on stdin
//	wsb-agent serve --stdio         the protocol on stdin/stdout (an SSH session's channel)
//	wsb-agent sftp-server           plain SFTP on stdin/stdout
//	wsb-agent reap ...              internal: one command's reaper
//
// It must be statically linked, since it runs in images that share
// nothing with the host:
//
//	CGO_ENABLED=0 go build -o wsb-agent ./cmd/wsb-agent
package main

import (
	"os"

	"github.com/wsbroker/wsbroker/agent"
)

func main() {
	os.Exit(agent.Main(os.Args[1:]))
}
