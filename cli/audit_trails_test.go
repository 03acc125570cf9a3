package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
)

// TestServeKeepsUnauthenticatedRequestsApart: serve opens the trail of
// requests that fail authentication beside the audit file, as a chain of
// its own that the audit's rotated-file pattern does not take in, and
// without the audit's space reserve.
func TestServeKeepsUnauthenticatedRequestsApart(t *testing.T) {
	dir := t.TempDir()
	main, unauth, err := openAudits(serveConfig{Audit: auditConfig{File: filepath.Join(dir, "audit.jsonl")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close()
	defer unauth.Close()
	if want := filepath.Join(dir, "audit-unauthenticated.jsonl"); unauth.Path() != want {
		t.Fatalf("the unauthenticated trail is %s, want %s", unauth.Path(), want)
	}
	if err := unauth.Write(audit.Event{AuditID: "u", Rule: "authentication"}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(main.Path()); err != nil || st.Size() != 0 {
		t.Fatalf("the tenants' trail after an unauthenticated record: %v %+v", err, st)
	}
	if rotated, _ := filepath.Glob(main.Path() + ".*"); len(rotated) != 0 {
		t.Fatalf("the audit's rotated-file pattern takes in %v", rotated)
	}
	if main.Reserved() == 0 || unauth.Reserved() != 0 {
		t.Fatalf("reserves: audit %d bytes, unauthenticated trail %d", main.Reserved(), unauth.Reserved())
	}
}
