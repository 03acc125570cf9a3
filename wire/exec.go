package wire

import "github.com/wsbroker/wsbroker/opsapi"

// ExecRequest is the body of POST /exec: an opsapi.ExecRequest whose
// timeout travels as seconds.
type ExecRequest struct {
	Command string   `json:"command"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env,omitempty"`
	// Timeout is in seconds; 0 or absent means none.
	Timeout float64 `json:"timeout,omitempty"`
}

// Exec stream line types.
const (
	LineOutput = "output" // ExecLine with Data
	LineExit   = "exit"   // ExecExit, the last line of a command that ran
	LineError  = "error"  // ExecLine with Code and Detail, the last line of one that failed
)

// ExecLine is a line of the exec stream: LineOutput with Data, or
// LineError with Code and Detail.
type ExecLine struct {
	Type string `json:"type"`
	// Data is at most 32 KiB of raw output, base64 on the wire.
	Data []byte `json:"data,omitempty"`
	// Code and Detail describe a failure after the stream began.
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// ExecExit is the last line of an exec stream whose command ran: the
// result's fields beside the type.
type ExecExit struct {
	Type string `json:"type"` // LineExit
	opsapi.ExecResult
}

// AnyExecLine decodes any line of the exec stream, as a client reads it:
// LineOutput, LineError or LineExit, told apart by Type.
type AnyExecLine struct {
	ExecLine
	opsapi.ExecResult
}
