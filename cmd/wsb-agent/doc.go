// Command wsb-agent is the in-box agent (package remote/agent): injected
// read-only into docker workspaces, copied into kubernetes pods and
// uploaded to SSH hosts. One binary, four ways to start it:
//
//	wsb-agent                      SFTP on stdin/stdout (the engine-exec fallback's channel)
//	wsb-agent serve --connect PATH the agent: TLS on a connection to the broker's Unix socket, keys as one JSON line on stdin
//	wsb-agent serve --stdio        the agent's protocol on stdin/stdout
//	wsb-agent reap ...             internal: one command's reaper
//
// The SFTP server is package remote/sftpserver: pkg/sftp's server
// (SFTP v3 with posix-rename@openssh.com, statvfs@openssh.com and
// hardlink@openssh.com) plus atomic-write@wsbroker.dev and
// read-small@wsbroker.dev, which replace and read a small file in one
// round trip instead of three.
//
// It must be statically linked, since it runs in images that share
// nothing with the host:
//
//	CGO_ENABLED=0 go build -o wsb-agent ./cmd/wsb-agent
//
// Put the binary beside the broker's executable, on the broker's PATH, or
// name it in a backend's agentBinary setting.
package main
