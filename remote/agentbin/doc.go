// Package agentbin finds the broker's static binaries that backends put
// into workspaces (the in-box agent, which is also the SFTP server): a
// configured path, or the name beside the broker's executable, or on
// PATH, and checks that it is a statically linked ELF file, since it runs
// in images and on hosts that share no libc with the broker.
package agentbin
