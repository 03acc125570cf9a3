// Package client is the Go client of the broker's HTTP API.
//
// # Overview
//
// A Client manages workspaces (create, list, get, delete) and hands out
// Workspace values that implement every opsapi interface over the wire:
// a host that keeps its own tool logic can swap its local operations for a
// remote, sandboxed workspace without changing a line of tool code. The
// same Workspace also runs whole tools on the broker (CallTool, Batch),
// with pi's semantics and, when asked, streamed progress.
//
// The client follows the wire contract in docs/api.md, with the body types
// of package wire (it builds neither the tools nor any backend): bearer-token
// authentication, paths in the `path` query parameter, raw file bodies,
// NDJSON streams for exec and tool progress, and RFC 9457 problem
// documents for errors.
//
// # Errors
//
// ToNative (errors.go) is the one place that turns a problem document into
// a Go error: its `code` becomes the matching opsapi kind, so
// errors.Is(err, opsapi.ErrNotExist) holds for a missing file whether the
// workspace is local or behind the broker. errors.As with *wire.Problem
// gives the HTTP status and the server's detail. The code table is
// wire's, the one the broker answers by.
//
// # Streaming
//
// Open returns the response body as it arrives; WriteFile sends its reader
// as the request body without buffering it, and a reader that fails aborts
// the request so the broker leaves the old file in place. Exec writes the
// command's output as it arrives; cancelling its context closes the request,
// which makes the broker kill the command's whole process tree.
//
// # Example
//
//	c := client.New("http://127.0.0.1:8722", token)
//	info, err := c.CreateWorkspace(ctx, "local", nil)
//	if err != nil { ... }
//	ws := c.WorkspaceFor(info)
//	defer ws.Destroy(ctx)
//	err = ws.WriteFile(ctx, "hello.txt", strings.NewReader("hi\n"))
//	res, err := ws.CallTool(ctx, "bash", json.RawMessage(`{"command":"cat hello.txt"}`), nil)
package client
