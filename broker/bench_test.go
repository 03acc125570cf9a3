//nolint:bodyclose // every response body is closed in the loop
package broker_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func benchGet(b *testing.B, e *env, path string) {
	b.Helper()
	req := e.request("GET", path, nil)
	b.ResetTimer()
	for b.Loop() {
		resp, err := e.hs.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkReadFile4K is the "4 KiB file read through HTTP".
func BenchmarkReadFile4K(b *testing.B) {
	e := newEnv(b, nil)
	ws := e.workspace()
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "4k.bin"), strings.Repeat("x", 4096), nil)
	benchGet(b, e, wsPath(ws, "/files", "4k.bin"))
}

// BenchmarkBashTrue is the "bash true through HTTP", as a tool call.
func BenchmarkBashTrue(b *testing.B) {
	e := newEnv(b, nil)
	ws := e.workspace()
	for b.Loop() {
		resp, err := e.hs.Client().Do(e.request("POST", "/v1/workspaces/"+ws.ID+"/tools/bash", `{"command":"true"}`))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
