// Command wsb-sftp-server is an SFTP server on its standard input and
// output, for workspace containers.
//
// # Overview
//
// The docker backend bind-mounts this binary read-only into every
// container it creates (at /.wsbroker/sftp-server) and runs it in one
// long-lived exec whose stdio
// carries the workspace's file operations. It is package
// backends/shared/sftpserver: github.com/pkg/sftp's server (SFTP v3 with
// posix-rename@openssh.com, statvfs@openssh.com and hardlink@openssh.com)
// plus atomic-write@wsbroker.dev, which replaces a small file in one round
// trip instead of three, and read-small@wsbroker.dev, which reads one in
// one round trip instead of three, serving the container's filesystem as the
// container's user; it has no configuration and opens no socket.
//
// It must be statically linked, since it runs in images that share
// nothing with the host:
//
//	CGO_ENABLED=0 go build -o wsb-sftp-server ./cmd/wsb-sftp-server
//
// Put the binary beside the broker's executable, on the broker's PATH, or
// name it in the docker backend's sftpServerBinary setting.
package main
