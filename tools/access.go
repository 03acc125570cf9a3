package tools

import (
	"encoding/json"
	"time"
)

// Access is what one tool call reads, writes or runs, for a policy to
// decide on before the call runs. Paths are as the model gave them.
type Access struct {
	// Read and Write are the paths the call reads and writes.
	Read, Write []string
	// Command is the bash command line, when HasCommand.
	Command    string
	HasCommand bool
	// Timeout is the command's timeout; zero means none.
	Timeout time.Duration
}

// Describer is implemented by every tool: the Access of a call, computed
// from arguments that passed the shim and schema validation.
type Describer interface {
	Access(args json.RawMessage) Access
}

// pathArg is the path of a validated call; an omitted optional path is
// the working directory, as the tools read it.
func pathArg(args json.RawMessage) string {
	var a struct {
		Path *string `json:"path"`
	}
	_ = json.Unmarshal(args, &a) // validated: the shape is right
	if a.Path == nil {
		return "."
	}
	return *a.Path
}

// Access reads the one file. A full-output file of bash reads no
// workspace path: it is the broker's own record of output a permitted
// command already returned (and redaction still applies to the result).
func (t *readTool) Access(args json.RawMessage) Access {
	p := pathArg(args)
	if _, ok := spillName(p); ok {
		return Access{}
	}
	return Access{Read: []string{p}}
}

// Access writes the one file.
func (t *writeTool) Access(args json.RawMessage) Access {
	return Access{Write: []string{pathArg(args)}}
}

// Access reads and writes the one file.
func (t *editTool) Access(args json.RawMessage) Access {
	p := pathArg(args)
	return Access{Read: []string{p}, Write: []string{p}}
}

// Access reads the searched path.
func (t *grepTool) Access(args json.RawMessage) Access { return Access{Read: []string{pathArg(args)}} }

// Access reads the searched directory.
func (t *findTool) Access(args json.RawMessage) Access { return Access{Read: []string{pathArg(args)}} }

// Access reads the listed directory.
func (t *lsTool) Access(args json.RawMessage) Access { return Access{Read: []string{pathArg(args)}} }

// Access runs the command with its timeout (none when it does not parse:
// the call then fails on it).
func (t *bashTool) Access(args json.RawMessage) Access {
	var a bashArgs
	_ = json.Unmarshal(args, &a)
	timeout, _, _ := parseTimeout(a.Timeout)
	return Access{Command: a.Command, HasCommand: true, Timeout: timeout}
}

var (
	_ Describer = (*readTool)(nil)
	_ Describer = (*writeTool)(nil)
	_ Describer = (*editTool)(nil)
	_ Describer = (*grepTool)(nil)
	_ Describer = (*findTool)(nil)
	_ Describer = (*lsTool)(nil)
	_ Describer = (*bashTool)(nil)
)
