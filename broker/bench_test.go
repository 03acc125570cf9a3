//nolint:bodyclose // every response body is closed in the loop
package broker_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
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

// BenchmarkWriteFile4K is a 4 KiB file written through HTTP.
func BenchmarkWriteFile4K(b *testing.B) {
	e := newEnv(b, nil)
	ws := e.workspace()
	body := strings.Repeat("x", 4096)
	path := wsPath(ws, "/files", "4k.bin")
	for b.Loop() {
		resp, err := e.hs.Client().Do(e.request("PUT", path, body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkBashTrue is the "bash true through HTTP", as a tool call.
func BenchmarkBashTrue(b *testing.B) {
	e := newEnv(b, nil)
	ws := e.workspace()
	benchPost(b, e, "/v1/workspaces/"+ws.ID+"/tools/bash", `{"command":"true"}`)
}

// benchPost posts body to path in a loop, expecting 200.
func benchPost(b *testing.B, e *env, path, body string) {
	b.Helper()
	for b.Loop() {
		resp, err := e.hs.Client().Do(e.request("POST", path, body))
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

// benchTenancy is a broker with a tenant whose policy has path rules and
// a redaction rule, writing an audit file: what tenancy costs per call.
func benchTenancy(b *testing.B) (*env, wire.WorkspaceInfo) {
	b.Helper()
	pol, err := policy.Parse([]byte("paths:\n  read:\n    deny: ['**/.env']\nredact:\n  - name: k\n    pattern: 'SECRET-[0-9]{6}'\n"))
	if err != nil {
		b.Fatal(err)
	}
	tn, _ := tenant.New(tenant.Config{Name: "bench", TokenHashes: []string{tenant.HashToken(testToken)}}, pol)
	reg, _ := tenant.NewRegistry(tn)
	log, err := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = log.Close() })
	e := newEnv(b, func(c *broker.Config) { c.Tokens, c.Tenants, c.Audit = nil, reg, log })
	return e, e.workspace()
}

// BenchmarkReadFile4KTenancy is BenchmarkReadFile4K with policy,
// redaction and audit on.
func BenchmarkReadFile4KTenancy(b *testing.B) {
	e, ws := benchTenancy(b)
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "4k.bin"), strings.Repeat("x", 4096), nil)
	benchGet(b, e, wsPath(ws, "/files", "4k.bin"))
}

// BenchmarkReadToolTenancy and BenchmarkReadTool: a read tool call with
// and without tenancy.
func BenchmarkReadTool(b *testing.B) {
	e := newEnv(b, nil)
	benchReadTool(b, e, e.workspace())
}

func BenchmarkReadToolTenancy(b *testing.B) {
	e, ws := benchTenancy(b)
	benchReadTool(b, e, ws)
}

func benchReadTool(b *testing.B, e *env, ws wire.WorkspaceInfo) {
	b.Helper()
	writeHost(b, ws, "a.txt", strings.Repeat("line\n", 100))
	benchPost(b, e, "/v1/workspaces/"+ws.ID+"/tools/read", `{"path":"a.txt"}`)
}

// BenchmarkStartWith2000Workspaces is a broker start (the local
// backend's New and the broker's New, which adopts every workspace) with
// 2000 workspaces to rediscover; ns/workspace is what each one adds.
func BenchmarkStartWith2000Workspaces(b *testing.B) {
	const n = 2000
	state := b.TempDir()
	logger := slog.New(slog.DiscardHandler)
	lb, err := local.New(local.Config{StateDir: state}, logger)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := lb.Create(b.Context(), opsapi.WorkspaceSpec{ID: fmt.Sprintf("ws%05d", i)}); err != nil {
			b.Fatalf("create %d: %v", i, err)
		}
	}
	_ = lb.Close()
	b.ResetTimer()
	for range b.N {
		lb, err := local.New(local.Config{StateDir: state}, logger)
		if err != nil {
			b.Fatal(err)
		}
		srv, err := broker.New(broker.Config{Tokens: []string{testToken}}, map[string]opsapi.Backend{"local": lb}, logger)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = srv.Shutdown(b.Context())
		_ = lb.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/workspace")
}
