// Package sshexec runs commands on a machine reached over SSH, one session
// channel each: the transport package remoteexec's Runner is given there
// (its StartFunc and RunFunc), the searches without an in-box agent, and
// the start of that agent on a session of its own.
//
// # Overview
//
// Sessions holds one account's session slots on a connection it is given
// by a ClientFunc (the caller dials, authenticates and reconnects). The
// server's MaxSessions bounds sessions per connection: one is the SFTP
// channel, two are kept for kills (one holds the kill helper), the rest
// run commands and searches, and more wait for a slot. A server that
// refuses a channel at its limit (counting closes it has not processed
// yet) is asked again after a few milliseconds. A slot is given back only
// once the server has confirmed the channel's close.
//
// A command's exit status is read at the channel level, when the
// exit-status request arrives, before its output ends (remoteexec.Exiter).
// Each connection keeps one spare channel, opened in the background on a
// free command slot after a command starts, so the next command waits for
// its exec request alone. The login shell runs each command line (`sh -c
// SCRIPT NAME ARGS` becomes `set -- ARGS` and SCRIPT: one program less).
//
// # Kills at a full process table
//
// Attach starts remoteexec.KillHelperScript on every new connection, on
// a kill slot of its own: a fork bomb at the account's process limit lets
// no new session start, and the helper, already running, still kills it.
//
// # The in-box agent
//
// Agent uploads the broker's static agent binary over SFTP, named by its
// content hash under the account's home (a host that has that build is not
// sent it again), and starts it on a session whose stdin and stdout carry
// the agent's protocol: SSH already encrypts and authenticates them.
package sshexec
