// Package bgproc keeps a workspace's background processes: commands
// started without a caller waiting for them, each with a handle (an id),
// its output in a bounded log that readers address by byte offset, an
// optional stdin that callers write to in pieces, and signals for its
// tree.
//
// A process runs through whatever RunFunc the caller gives (the
// workspace service passes the backend's Exec behind the tenant's policy
// and redaction), so it has the same kill boundary and limits as any
// command: cancelling it kills its whole tree.
//
// The log is a Ring: a file of fixed size on the broker's host that keeps
// the last Size bytes written. Offsets are absolute (the count of bytes
// written before), so a reader that lost its connection resumes from the
// offset it reached with nothing lost or doubled, unless the ring has
// wrapped past it; then it is told exactly which bytes were dropped. The
// log lives outside the workspace so that its commands can neither fill
// it past its bound nor rewrite it.
package bgproc
