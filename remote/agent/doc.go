// Package agent is the in-box agent: one static binary (cmd/wsb-agent),
// started once per remote workspace and kept running, that serves the
// workspace's file operations and commands next to the files, over one
// connection.
//
// # Protocol
//
// A connection is a Unix socket under mutual TLS 1.3 with keys pinned
// by the broker (docker: the agent, given its keys on stdin, dials a
// socket the broker listens on in a per-workspace directory bind-mounted
// read-only into the container, so no byte crosses the engine and the
// workspace can write nothing there; ConnectAndServe), or the stdio of
// an SSH session, already encrypted and private to the broker. The
// agent makes itself undumpable before it reads its keys, and its stdin
// is /dev/null once it has. On it:
//
//  1. Hello: each side writes "wsb-agent <version>\n" and reads the
//     other's; both then speak the lower version. A peer below
//     MinVersion is refused with a line saying why. This is the one
//     place a future version negotiates. Version 2 added a command's
//     stdin and signals, version 3 its terminal; against an older agent
//     the client refuses a command that asks for what that agent lacks
//     (ErrUnavailable) rather than let the agent ignore it, and runs the
//     others as before.
//  2. Multiplexing: github.com/hashicorp/yamux, client on the broker's
//     side. Yamux gives each call a stream of its own with per-stream
//     flow control (a window of StreamWindow bytes), so a slow command's
//     output never delays another call's file operations, and a reader
//     that stops reading stops the writer, not the agent's memory.
//  3. Each stream starts with a request header: a 4-byte big-endian
//     length and a JSON Request. Op "sftp" turns the stream into an SFTP
//     v3 session (package sftpserver, with its one-trip extensions);
//     op "exec" runs a command and answers with frames (WriteFrame);
//     the client's frames on it kill the command, signal it, feed its
//     stdin and resize its terminal. Version 4: op "read" answers a
//     file's size and then its bytes, op "write" replaces a file
//     atomically with the stream's chunks (the rules of SFTP's one-trip
//     AtomicWrite, for any size), op "readdir" lists a directory in one
//     answer.
//
// SFTP is kept for files, not a typed protocol: pkg/sftp's client and
// server are maintained, pipelined and already shared by every remote
// backend (package sftpops); the agent only changes what carries it. The
// bytes of whole files are the exception (read, write): one raw stream in
// 512 KiB frames instead of a request and an answer per 32 KiB packet; so
// are listings (readdir), one answer instead of a round trip per batch.
//
// # Commands and the kill
//
// Each command runs under a reaper of its own: the agent re-executes itself
// as "wsb-agent reap", which becomes a child subreaper
// (PR_SET_CHILD_SUBREAPER) and starts `SHELL -c COMMAND` in a new process
// group. Reapers are started ahead of time and reused once their subtree
// is empty (reapers.go). Every descendant, whether it calls setsid, double-forks or clears
// its environment, stays below the reaper: when its parent dies it is
// re-parented to the reaper, not to the container's init. A kill (the
// client's Kill frame, or the client vanishing before the command exited)
// is a message on the reaper's control socket; the reaper ends its whole subtree (package
// killtree's KillSubtree: SIGTERM, a grace, SIGKILL rounds until empty,
// pidfds against pid reuse) and reports how many it signalled. After the
// command exits, the reaper stays while background children live, reaping
// zombies, so they stay killable.
//
// A signal (the client's Signal frame, a number from 1 to 64; anything
// else is refused and the stream goes on) takes the same way: a message
// on the control socket, taken in order after the job's, and the reaper
// sends it once to every process of its subtree, found in /proc and
// pinned with pidfds as for the kill. One for a command already done is
// ignored.
//
// Output: the command's stdout and stderr are one pipe (as pi merges
// them), relayed in frames of up to 32 KiB. Exit codes follow the shell:
// 128+N for a command ended by signal N.
//
// Stdin is /dev/null unless the request asks for it (ExecSpec.Stdin):
// then it is a pipe, its read end handed to the reaper with the others,
// fed by the client's Stdin frames and closed at its StdinEOF frame. It
// is flow-controlled by credit so that a command that does not read its
// stdin never holds up the client's other frames (a kill must get
// through): the client keeps at most StdinWindow bytes unacknowledged;
// the agent queues them and writes the pipe from a goroutine of its own,
// acknowledging each chunk (StdinAck). Once every process holding the
// pipe has closed it, the agent drops what comes, still acknowledging
// it, and tells the client to stop (StdinClosed). Stdin beyond the
// window, after its end or for a command without one breaks the
// protocol: the agent ends that stream, which kills its command.
//
// A terminal (ExecSpec.TTY, version 3) replaces the pipes: the agent
// opens a pseudo-terminal of the size asked for and hands its slave to
// the reaper as the command's stdin, stdout and stderr; the reaper
// starts the command in a session of its own (setsid, not a new group)
// with the slave as its controlling terminal, so a Ctrl-C typed at it
// (byte 0x03) signals its foreground group as a person's terminal does.
// The kill and signals still go to the reaper's whole subtree. Output is
// what the master side reads, relayed as FrameOutput until every holder
// of the slave has closed it (the master's EIO, then FrameEOF). Stdin,
// with the same credit, is written to another descriptor of the master;
// StdinEOF only stops the writing (a terminal has no end of input).
// The client's Resize frame ("rows cols") sets the terminal's size, and
// the kernel sends SIGWINCH to its foreground group; one that is
// malformed, or for a command without a terminal, is dropped. As for
// pipes, the exit's frame follows the output written before the exit:
// woken by the exit, a terminal's relay reads on for up to 50 ms, the
// kernel's hand-over from slave to master having no count to flush by,
// and is normally done at the terminal's end well before.
package agent
