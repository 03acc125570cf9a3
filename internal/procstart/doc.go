// Package procstart lets the broker process start child processes only
// a few at a time.
//
// Go starts a process with vfork through a raw system call: the starting
// goroutine keeps its P (its right to run Go code) until the child has
// exec'd, and on a loaded host a child waits milliseconds to tens of
// milliseconds for a CPU before it gets there. With 200 commands started
// at once every P of the broker was held that way, so nothing else ran,
// not even /healthz, for up to a second (`make bench`, hostile.healthz).
// Every fork in the broker goes through Do, which lets at most
// GOMAXPROCS-1 (and at least one) run at once: one P always stays free
// for the rest of the broker. A command that still has to enter its
// cgroup once exec'd (cgroup v1) keeps its slot until it has
// (StartThen): until then it runs in the broker's own scheduling group.
//
// Being the one gate, Do is also where the broker's descriptors are kept
// from its children: before each start every descriptor above 2 is
// marked close-on-exec (close_range), so one the broker inherited (from a
// supervisor, a log redirection, socket activation) or one opened
// without the flag reaches no command; a child gets its standard streams
// and the ExtraFiles its caller gave it.
package procstart
