// Package execpump relays a running command's output to its caller and
// decides when the call is over, the same way for every backend.
//
// # Overview
//
// A backend starts the command, then hands Run the command's output (one
// reader: stdout and stderr already joined), a channel on which it reports
// how the command ended (Event), and a Kill function. Run writes every
// chunk of output to Config.Output from one goroutine, in order, and never
// after it returns; a reader goroutine hands each chunk over and waits
// until it is written, so one buffer suffices.
//
// # When a call ends
//
// A call is over once the command has exited, any kill has finished, and
// the output has ended or stayed quiet for DrainIdle (each late chunk
// re-arms it), for at most MaxDrain. So a background child that keeps the
// output open but is silent releases the call, while one still printing is
// still captured. Quiet means the reader has waited in its Read for
// DrainIdle and the backend holds nothing unread (Config.Pending, when it
// can tell): a reader not yet scheduled on a loaded machine is not
// silence. Both clocks count the command's time only: while Output.Write
// blocks on a caller that reads slowly they stand still, so such a caller
// still gets everything the command wrote before it exited.
//
// On the deadline (Config.Timeout) or when ctx ends, Run calls Kill once,
// on a goroutine of its own, and counts what it killed; the result says
// TimedOut or Canceled. When the command has not exited GiveUp after its
// kill, Run abandons it (Result.Abandoned) rather than hang.
//
// An Event with Err ends the call at once with that error, e.g. a working
// directory the command could not enter; unless Fatal, such an event is
// ignored while a kill runs (the kill's outcome says what happened).
package execpump
