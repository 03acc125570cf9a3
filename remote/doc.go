// Package remote is the one workspace type of every backend whose box
// runs the in-box agent (docker, ssh, kubernetes): files, commands and
// searches over the agent's connection, or over the backend's fallback
// where a box has no agent.
//
// # Overview
//
// A backend makes a Workspace with New, giving it a Transport (start or
// reach the box's agent, say whether the box is still there, destroy it)
// and, where it has one, a Fallback (SFTP, commands and searches without
// the agent). The Workspace implements opsapi's file, tree, command and
// search operations, Resolver, TransportReporter, GoneReporter and
// Destroyer; a backend's own Workspace embeds *Workspace and adds only
// what differs (its lifecycle, owner, creation time).
//
// # The agent connection
//
// The agent is started at the first call that needs it, one start shared
// by concurrent callers, and started afresh when its connection ended
// (logged as a warning, counted by Restarts). A start that fails answers
// ErrUnavailable, and with Config.AgentRetry set every call answers so
// until the back-off ends, never through the fallback: a workspace with
// an agent does not quietly lose the whole-tree kill. A Transport whose
// box has no agent now (an ssh connection where it could not start)
// answers ErrNoAgent, and that call takes the Fallback.
//
// # Files
//
// File operations are sftpops.FS over the agent's SFTP stream, made at
// the first use with the agent's account (Identity), with the agent's raw
// read, list and write calls; reads and listings are retried once on a
// new connection when the old one was lost, as SFTP's calls are. Without
// an agent, or with Config.SFTPAlways, the Fallback's SFTP serves them.
//
// # Commands and searches
//
// Exec checks the request (remoteexec.CheckRequest), refuses a working
// directory under /proc, named or reached through links (the shape of
// CVE-2024-21626), checks that it exists, and runs the command through
// the agent or the Fallback. With Config.MemoryLimit set, the box's OOM
// kill count read before and after the command tells whether the kernel's
// OOM killer struck meanwhile. Search is rgjson.Remote, ripgrep started
// by the agent or the Fallback.
//
// # Gone
//
// A destroyed workspace answers ErrNotExist to every call. A box removed
// behind the broker's back (Vanish, or Transport.Vanished after its agent
// could not be started) is reported by Gone and answers ErrNotExist too.
package remote
