package wire

import "encoding/json"

// ToolDefinition is the declaration of a tool that a host hands its model.
type ToolDefinition struct {
	Name          string          `json:"name"`
	Label         string          `json:"label,omitempty"`
	Description   string          `json:"description"`
	Parameters    json.RawMessage `json:"parameters"` // JSON Schema
	PromptSnippet string          `json:"promptSnippet,omitempty"`
}

// ToolList is the body of GET /v1/tools.
type ToolList struct {
	Tools []ToolDefinition `json:"tools"`
}

// Content is one block of a tool result: text, or an image as base64.
type Content struct {
	Type     string `json:"type"` // "text" or "image"
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"` // base64, images only
	MimeType string `json:"mimeType,omitempty"`
}

// ToolResult is what a tool returns to the model, shaped as pi's
// AgentToolResult. A failed tool is a ToolResult with IsError set and the
// error's message as its only text.
type ToolResult struct {
	Content []Content `json:"content"`
	Details any       `json:"details,omitempty"`
	IsError bool      `json:"isError"`
}

// Stream line types of a streamed tool call.
const (
	LineUpdate = "update" // a partial result while the tool runs
	LineResult = "result" // the final result, the stream's last line
)

// StreamLine is one line of a streamed tool call (Accept:
// application/x-ndjson).
type StreamLine struct {
	Type   string     `json:"type"` // LineUpdate or LineResult
	Result ToolResult `json:"result"`
}

// AnyStreamLine decodes any line of a streamed tool call, as a client
// reads it: LineUpdate, LineResult, or a LineError with Code and Detail
// as the exec stream's. The broker sends no LineError in a tool stream
// today; a client reads one should a stream fail after it began.
type AnyStreamLine struct {
	StreamLine
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Batch modes, as pi's agent loop runs the tool calls of one message.
const (
	Parallel   = "parallel" // the default
	Sequential = "sequential"
)

// BatchRequest is the body of POST /v1/workspaces/{id}/tools.
type BatchRequest struct {
	Calls []BatchCall `json:"calls"`
	// Mode is Parallel (the default, as in pi) or Sequential.
	Mode string `json:"mode,omitempty"`
}

// BatchCall is one call of a batch.
type BatchCall struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments are the tool's JSON arguments; absent means {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// BatchResult is one result of a batch, in the order of the calls.
type BatchResult struct {
	ID     string     `json:"id,omitempty"`
	Name   string     `json:"name"`
	Result ToolResult `json:"result"`
}

// BatchResponse is the answer to a batch.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}
