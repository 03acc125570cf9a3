package mcp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReadTool is one read tool call through the workspace's MCP
// endpoint and through the HTTP tool route, for a profile of what MCP
// adds (`make bench` has the side-by-side figures).
func BenchmarkReadTool(b *testing.B) {
	h := newHarness(b, nil, nil, nil)
	ws := h.create(aliceToken)
	if err := os.WriteFile(filepath.Join(ws.Root, "a.txt"), []byte(strings.Repeat("line\n", 100)), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("mcp", func(b *testing.B) {
		cs, err := h.connect(aliceToken, "/v1/workspaces/"+ws.ID+"/mcp", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for b.Loop() {
			res, err := cs.CallTool(b.Context(), &sdk.CallToolParams{Name: "read", Arguments: map[string]any{"path": "a.txt"}})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		for b.Loop() {
			h.httpTool(aliceToken, ws.ID, "read", map[string]any{"path": "a.txt"})
		}
	})
}
