package audit_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
)

// BenchmarkReadNewest100: GET /v1/audit's read, the newest 100 of one
// tenant's records on a trail of 200,000 records (about 100 MiB over
// rotated files): it reads from the end, so the trail's length does
// not matter.
func BenchmarkReadNewest100(b *testing.B) {
	l, err := audit.OpenWith(filepath.Join(b.TempDir(), "audit.jsonl"), audit.Options{MaxBytes: 32 << 20}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	pad := strings.Repeat("x", 300)
	for i := range 200_000 {
		tenant := "a"
		if i%2 == 0 {
			tenant = "b"
		}
		if err := l.Write(audit.Event{AuditID: "id", Tenant: tenant, Reason: pad, Stage: audit.StageToolCall}); err != nil {
			b.Fatal(err)
		}
	}
	keep := func(e *audit.Event) bool { return e.Tenant == "b" }
	b.ResetTimer()
	for range b.N {
		recs, err := l.Read(keep, 100)
		if err != nil || len(recs) != 100 {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}
