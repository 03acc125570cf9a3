//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
)

// countScript counts the calls running at once in files of the
// workspace, under a mkdir lock: "running" now, "max" the most seen.
const countScript = `lock() { until mkdir .lock 2>/dev/null; do sleep 0.01; done; }
lock; n=$(( $(cat running 2>/dev/null || echo 0) + 1 )); echo $n > running
m=$(cat max 2>/dev/null || echo 0); [ $n -gt $m ] && echo $n > max; rmdir .lock
sleep 0.4
lock; echo $(( $(cat running) - 1 )) > running; rmdir .lock; echo done`

func (tc *tenancy) batch(token, id string, calls []wire.BatchCall) wire.BatchResponse {
	tc.t.Helper()
	resp, data := tc.as(token, "POST", "/v1/workspaces/"+id+"/tools", wire.BatchRequest{Calls: calls})
	if resp.StatusCode != 200 {
		tc.t.Fatalf("batch: %d %s", resp.StatusCode, data)
	}
	var out wire.BatchResponse
	if err := json.Unmarshal(data, &out); err != nil {
		tc.t.Fatal(err)
	}
	return out
}

// TestBatchCallsCountAgainstConcurrency: with concurrentCalls 2, a
// parallel batch of 6 bash calls never has more than 2 running at once
// (counted by the calls themselves), and every call still runs.
func TestBatchCallsCountAgainstConcurrency(t *testing.T) {
	tc := newTenancy(t, func(c *tenant.Config) { c.Quotas.ConcurrentCalls = 2 }, nil, nil)
	ws := tc.createAs(aliceToken)
	args, _ := json.Marshal(map[string]any{"command": countScript})
	calls := make([]wire.BatchCall, 6)
	for i := range calls {
		calls[i] = wire.BatchCall{ID: fmt.Sprint(i), Name: "bash", Arguments: args}
	}
	out := tc.batch(aliceToken, ws.ID, calls)
	for _, r := range out.Results {
		if r.Result.IsError || !strings.Contains(r.Result.Content[0].Text, "done") {
			t.Fatalf("call %s: %+v", r.ID, r.Result)
		}
	}
	most, err := strconv.Atoi(strings.TrimSpace(readHost(t, ws, "max")))
	if err != nil || most < 1 || most > 2 {
		t.Fatalf("%d bash calls ran at once (%v), concurrentCalls is 2", most, err)
	}
}

// TestBatchCallsCountAgainstRate: with a burst of 3 and almost no refill,
// a batch of 5 calls runs 3 (the request's token and two more) and
// refuses 2 with an isError result naming the rate, audited as such.
func TestBatchCallsCountAgainstRate(t *testing.T) {
	tc := newTenancy(t, func(c *tenant.Config) { c.Quotas.RequestsPerSecond = 0.001; c.Quotas.Burst = 4 }, nil, nil)
	ws := tc.createAs(aliceToken) // takes one token
	calls := make([]wire.BatchCall, 5)
	for i := range calls {
		calls[i] = wire.BatchCall{ID: fmt.Sprint(i), Name: "ls", Arguments: json.RawMessage(`{}`)}
	}
	out := tc.batch(aliceToken, ws.ID, calls)
	ran, refused := 0, 0
	for _, r := range out.Results {
		switch {
		case !r.Result.IsError:
			ran++
		case strings.Contains(r.Result.Content[0].Text, "Blocked by rate limit"):
			refused++
		default:
			t.Fatalf("call %s: %+v", r.ID, r.Result)
		}
	}
	if ran != 3 || refused != 2 {
		t.Fatalf("%d calls ran and %d were refused, want 3 and 2", ran, refused)
	}
	denied := 0
	for _, ev := range tc.records() {
		if ev.Tool == "ls" && ev.Decision == "deny" && ev.Rule == "rate" {
			denied++
		}
	}
	if denied != 2 {
		t.Fatalf("%d rate denials audited, want 2", denied)
	}
}

// TestDefaultWorkspaceQuota: a tenant that sets no workspace quota (here
// the single-token setup's) holds at most tenant.DefaultWorkspaces.
func TestDefaultWorkspaceQuota(t *testing.T) {
	e := newEnv(t, nil)
	for i := range tenant.DefaultWorkspaces {
		if resp, data := e.do("POST", "/v1/workspaces", map[string]any{}); resp.StatusCode != 201 {
			t.Fatalf("create %d: %d %s", i, resp.StatusCode, data)
		}
	}
	p := e.problem(403, "denied", "POST", "/v1/workspaces", map[string]any{})
	if !strings.Contains(p.Detail, fmt.Sprintf("of %d workspaces", tenant.DefaultWorkspaces)) {
		t.Fatalf("past the default quota: %+v", p)
	}
}

// TestCreateCannotRaiseTheLocalLimits: a create over HTTP asking for more
// than the local backend's limits (here its defaults, 2 GiB and 4096
// pids) is refused with invalid, naming each limit and both values, and
// no workspace is made (issue 37, finding 2).
func TestCreateCannotRaiseTheLocalLimits(t *testing.T) {
	testutil.RequireRoot(t) // limits need cgroups
	e := newEnv(t, nil)
	p := e.problem(400, "invalid", "POST", "/v1/workspaces", map[string]any{
		"options": map[string]any{"limits": map[string]any{"memoryBytes": 64 << 30, "pids": 1_000_000}}})
	for _, want := range []string{"limits.memoryBytes 68719476736", "of 2147483648", "limits.pids 1000000", "of 4096"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("the refusal %q does not name %q", p.Detail, want)
		}
	}
	if all, err := e.backend.List(t.Context()); err != nil || len(all) != 0 {
		t.Fatalf("workspaces after the refusal: %v %v", all, err)
	}
}
