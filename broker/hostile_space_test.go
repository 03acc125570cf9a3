//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/tenant"
)

// refusalBurst is the budget of records, one by one, of requests the
// audit refuses before authentication in newTenancyAt's broker.
const refusalBurst = 20

// newTenancyAt is newTenancy with the backend's state directory at state
// and the audit opened with opts in auditDir.
func newTenancyAt(t *testing.T, state, auditDir string, opts audit.Options) *tenancy {
	t.Helper()
	at, _ := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken(aliceToken)}}, nil)
	bt, _ := tenant.New(tenant.Config{Name: "bob", TokenHashes: []string{tenant.HashToken(bobToken)}}, nil)
	admin, _ := tenant.New(tenant.Config{Name: "ops", Admin: true, TokenHashes: []string{tenant.HashToken(adminToken)}}, nil)
	reg, err := tenant.NewRegistry(at, bt, admin)
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(auditDir, "audit.jsonl")
	log, err := audit.OpenWith(auditPath, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	e := newEnvAt(t, state, func(c *broker.Config) {
		c.Tokens, c.Tenants, c.Audit = nil, reg, log
		c.UnauthAuditBurst, c.UnauthSummaryEvery = refusalBurst, 200*time.Millisecond
	})
	return &tenancy{env: e, auditPath: auditPath}
}

// TestFullStateDiskStillDeletes: one tenant fills the filesystem that
// holds the state directory and the audit (the default layout). Creates
// are refused with 503 while it is full (the refusals, made before
// authentication, recorded one by one only within the budget of those,
// the rest counted, so they cannot drain the audit's reserve), but DELETEs (bob's and an
// admin's of their own, then the filler's owner's) still answer 204, are
// recorded (in the audit's space reserve, as nothing is free), and free
// the space; then creates succeed again, with no
// restart and no cleanup by hand, and the chain verifies.
func TestFullStateDiskStillDeletes(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dir).CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "cannot mount a tmpfs: "+strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	tc := newTenancyAt(t, filepath.Join(dir, "state"), filepath.Join(dir, "audit"),
		audit.Options{MinFree: 1 << 20, Reserve: 1 << 20})
	filler, bobs, admins := tc.createAs(aliceToken), tc.createAs(bobToken), tc.createAs(adminToken)

	resp, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+filler.ID+"/tools/bash",
		map[string]any{"command": "head -c 64M /dev/zero > big; echo wrote"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("filling the disk: %d %s", resp.StatusCode, data)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free >= 1<<20 { //nolint:gosec,unconvert // block counts fit; Bsize is an int32 on darwin
		t.Fatalf("the workspace did not fill the state filesystem: %d bytes free", free)
	}
	start := time.Now()
	const creates = 300
	for range creates {
		resp, data = tc.as(bobToken, "POST", "/v1/workspaces", map[string]any{})
		checkProblem(t, resp, data, http.StatusServiceUnavailable, "unavailable")
	}
	elapsed := time.Since(start)

	for _, d := range []struct{ token, id string }{{bobToken, bobs.ID}, {adminToken, admins.ID}, {aliceToken, filler.ID}} {
		if resp, data := tc.as(d.token, "DELETE", "/v1/workspaces/"+d.id, nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE of %s on a full disk: %d %s", d.id, resp.StatusCode, data)
		}
	}
	if resp, data := tc.as(bobToken, "POST", "/v1/workspaces", map[string]any{}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a create once the space is back: %d %s", resp.StatusCode, data)
	}

	time.Sleep(400 * time.Millisecond) // the summary of the refusals counted
	deletes, refused, counted := 0, 0, int64(0)
	for _, ev := range tc.records() {
		if ev.Verb == "POST" && ev.Result != nil && ev.Result.Status == http.StatusServiceUnavailable && ev.Rule == "audit" {
			refused++
		}
		if ev.Stage == audit.StageSummary {
			counted += ev.Count
		}
		if ev.Verb == "DELETE" && ev.Result != nil && ev.Result.Status == http.StatusNoContent &&
			(ev.Workspace == bobs.ID || ev.Workspace == admins.ID || ev.Workspace == filler.ID) {
			deletes++
		}
	}
	allowed := refusalBurst + int(elapsed.Seconds()*broker.DefaultUnauthAuditPerSecond) + 1
	if refused == 0 || refused > allowed || int64(refused)+counted != creates {
		t.Errorf("%d creates refused on a full disk: %d recorded one by one (at most %d), %d counted in summaries",
			creates, refused, allowed, counted)
	}
	if deletes != 3 {
		t.Fatalf("%d of the 3 DELETEs on a full disk were recorded", deletes)
	}
	if rep, err := audit.Verify(tc.auditPath); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("chain: %v %v", err, rep.Problems)
	}
}
