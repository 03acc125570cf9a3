// Command wsb-sftp-server is the in-box agent (package agent), injected
// read-only into workspace containers at /.wsbroker/sftp-server. Its name
// is the one it had when it only served SFTP, kept so that existing
// configurations (sftpServerBinary) and images keep working:
//
//	wsb-sftp-server                      SFTP on stdin/stdout (the engine-exec fallback's channel)
//	wsb-sftp-server serve --connect PATH the agent: TLS on a connection to the broker's Unix socket, keys as one JSON line on stdin
//	wsb-sftp-server serve --stdio        the agent's protocol on stdin/stdout
//	wsb-sftp-server reap ...             internal: one command's reaper
//
// The SFTP server is package backends/shared/sftpserver: pkg/sftp's server
// (SFTP v3 with posix-rename@openssh.com, statvfs@openssh.com and
// hardlink@openssh.com) plus atomic-write@wsbroker.dev and
// read-small@wsbroker.dev, which replace and read a small file in one
// round trip instead of three.
//
// It must be statically linked, since it runs in images that share
// nothing with the host:
//
//	CGO_ENABLED=0 go build -o wsb-sftp-server ./cmd/wsb-sftp-server
//
// Put the binary beside the broker's executable, on the broker's PATH, or
// name it in the docker backend's sftpServerBinary setting.
package main
