//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestUnauthenticatedFloodIsBounded: 200 requests without a valid token,
// each with a 60 KiB query, write at most the peer's burst (plus what
// the rate refilled meanwhile) of audit records, each a few KiB; the rest
// are 429 and write nothing. A valid token from the same peer still works.
func TestUnauthenticatedFloodIsBounded(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	huge := strings.Repeat("a", 60<<10)
	start := time.Now()
	counts := map[int]int{}
	for i := range 200 {
		req := tc.request("GET", "/v1/workspaces?path="+huge, nil)
		if i%2 == 0 {
			req.Header.Set("Authorization", "Bearer wrong-token")
		} else {
			req.Header.Del("Authorization")
		}
		resp := tc.send(req)
		counts[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Fatal("a 429 without Retry-After")
		}
	}
	elapsed := time.Since(start)
	allowed := broker.DefaultUnauthBurst + int(elapsed.Seconds()*broker.DefaultUnauthPerSecond) + 1
	if counts[401] > allowed || counts[429] == 0 || counts[401]+counts[429] != 200 {
		t.Fatalf("statuses %v in %v; at most %d 401s expected", counts, elapsed, allowed)
	}
	if resp, data := tc.as(aliceToken, "GET", "/v1/workspaces", nil); resp.StatusCode != 200 {
		t.Fatalf("a valid token after the flood: %d %s", resp.StatusCode, data)
	}
	b, err := os.ReadFile(tc.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	denied := 0
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) > 8<<10 {
			t.Fatalf("a record of %d bytes", len(line))
		}
		if bytes.Contains(line, []byte(`"rule":"authentication"`)) {
			denied++
		}
	}
	if denied != counts[401] {
		t.Fatalf("%d authentication denials audited for %d 401s", denied, counts[401])
	}
	if rep, err := audit.Verify(tc.auditPath); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("chain: %v %v", err, rep.Problems)
	}
}

// TestFullAuditDiskRefusesCalls: with the audit file on a tmpfs that is
// full, a bash call is refused with 503 unavailable and does not run
// (its marker file is never made), /readyz says so; once there is room
// again calls run and the trail verifies.
func TestFullAuditDiskRefusesCalls(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "cannot mount a tmpfs: "+strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	path := filepath.Join(dir, "audit.jsonl")
	log, err := audit.OpenWith(path, audit.Options{MinFree: 64 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	tc := newTenancy(t, nil, nil, func(c *broker.Config) { c.Audit = log })
	ws := tc.createAs(aliceToken)
	bash := "/v1/workspaces/" + ws.ID + "/tools/bash"

	filler := filepath.Join(dir, "filler")
	testutil.FillDisk(t, filler)
	resp, data := tc.as(aliceToken, "POST", bash, map[string]any{"command": "touch marker"})
	checkProblem(t, resp, data, http.StatusServiceUnavailable, "unavailable")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if _, err := statHost(ws, "marker"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused call ran: marker %v", err)
	}
	r, _ := tc.hs.Client().Get(tc.hs.URL + "/readyz")
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz with a full audit disk: %d", r.StatusCode)
	}
	r.Body.Close()

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if resp, data := tc.as(aliceToken, "POST", bash, map[string]any{"command": "touch marker"}); resp.StatusCode != 200 {
		t.Fatalf("with room again: %d %s", resp.StatusCode, data)
	}
	if _, err := statHost(ws, "marker"); err != nil {
		t.Fatalf("the call with room again did not run: %v", err)
	}
	if rep, err := audit.Verify(path); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("chain: %v %v", err, rep.Problems)
	}
}
