// Package agentclient is the broker's side of the in-box agent's protocol
// (package agent): one multiplexed connection per workspace, an SFTP
// session on a stream of its own for file operations, and commands run
// with opsapi's semantics (package execpump: output, timeout, drain, the
// kill) on streams of their own, with their stdin and signals when the
// agent speaks protocol version 2 (agent.StdioVersion), and, from version
// 4 (agent.RawVersion), whole-file bytes as raw streams and listings in
// one answer (ReadFile, WriteFile, ReadDir).
package agentclient
