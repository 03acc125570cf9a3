package wire

import (
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// StartProcessRequest is the body of POST /processes: a command started
// in the background.
type StartProcessRequest struct {
	ExecRequest
	// Tag is the caller's label, shown in listings.
	Tag string `json:"tag,omitempty"`
	// Stdin keeps the command's stdin open for POST /processes/{proc}/stdin;
	// without it stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`
}

// BackgroundProcess describes a background process (the body of
// POST /processes, GET and DELETE /processes/{proc} and its wait).
type BackgroundProcess struct {
	ID        string     `json:"id"`
	Tag       string     `json:"tag,omitempty"`
	Command   string     `json:"command"` // as run, with the policy's redactions
	Cwd       string     `json:"cwd,omitempty"`
	State     string     `json:"state"` // ProcessRunning, ProcessExited or ProcessFailed
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Result is how an exited process ended.
	Result *opsapi.ExecResult `json:"result,omitempty"`
	// Error is why a failed process could not run.
	Error string `json:"error,omitempty"`
	// Stdin says whether stdin is open for writing.
	Stdin bool `json:"stdin"`
	// Output is what its log holds: bytes [First, Written) of its output.
	Output LogSpan `json:"output"`
	// Usage is what a running process's tree uses now, where the backend
	// can measure it (local with cgroups); absent otherwise.
	Usage *ProcessUsage `json:"usage,omitempty"`
}

// ProcessUsage is what a running process's tree uses.
type ProcessUsage struct {
	// CPUNs is the processor time of its live processes (their reaped
	// children's included), in nanoseconds.
	CPUNs int64 `json:"cpuNs"`
	// MemoryBytes is the memory its cgroup holds, page cache included.
	MemoryBytes int64 `json:"memoryBytes"`
}

// States of a BackgroundProcess.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited" // it ran and ended: Result says how
	ProcessFailed  = "failed" // it could not run, or its backend was lost: Error says why
)

// LogSpan is the part of a process's output its log still holds.
type LogSpan struct {
	// First is the offset of the oldest byte held; the bytes before it
	// were dropped when the log wrapped.
	First int64 `json:"first"`
	// Written is the count of bytes ever written, the offset of the next.
	Written int64 `json:"written"`
}

// SignalRequest is the body of POST /processes/{proc}/signal.
type SignalRequest struct {
	// Signal is SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2 or SIGTERM.
	Signal string `json:"signal"`
}

// StdinResult is the body of POST /processes/{proc}/stdin.
type StdinResult struct {
	Written int64 `json:"written"`
}

// Log stream line types (GET /processes/{proc}/logs), beside LineOutput
// and LineError.
const (
	LineDropped = "dropped" // LogLine: bytes [offset, next) were dropped from the log
	LineEnd     = "end"     // LogLine: the process still runs; offset is where to resume
)

// LogLine is a line of a process's log stream. Output lines carry their
// Data at Offset: a client that resumes from the offset after its last
// byte gets nothing twice and nothing lost. The last line is LineExit
// (with Result), LineError (the process failed: Code and Detail), or
// LineEnd when the stream was not asked to follow.
type LogLine struct {
	Type   string `json:"type"`
	Offset int64  `json:"offset"`
	// Data is at most 32 KiB of raw output, base64 on the wire.
	Data []byte `json:"data,omitempty"`
	// Next ends a LineDropped span.
	Next   int64              `json:"next,omitempty"`
	Result *opsapi.ExecResult `json:"result,omitempty"`
	Code   string             `json:"code,omitempty"`
	Detail string             `json:"detail,omitempty"`
}
