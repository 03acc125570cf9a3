package workspaces_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/workspaces"
)

// mustRun runs one tool call that must start (RunTool's error is only a
// bash call that could not start as a command).
func mustRun(t *testing.T, svc *workspaces.Service, ctx context.Context, w *workspaces.Workspace, seq int, name string, args json.RawMessage) tools.Result {
	t.Helper()
	res, err := svc.RunTool(ctx, w, seq, name, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// localWorkspace is a service over the local backend with alice's
// policy, its audit trail, and one workspace of alice's with env.
func localWorkspace(t *testing.T, pol *policy.Policy, env []workspaces.EnvVar) (*workspaces.Service, *workspaces.Workspace, *audit.Log) {
	t.Helper()
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	log, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"), 0, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	at, err := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken("alice-token")}}, pol)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tenant.NewRegistry(at)
	svc, err := workspaces.New(workspaces.Config{Backends: map[string]opsapi.Backend{"local": b}, DefaultBackend: "local",
		Tenants: reg, Audit: log}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	info, err := svc.Create(t.Context(), at, "", nil, env)
	if err != nil {
		t.Fatal(err)
	}
	w, err := svc.Lookup(t.Context(), at, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	return svc, w, log
}

// records reads the audit trail's tool-call records.
func records(t *testing.T, log *audit.Log) []audit.Event {
	t.Helper()
	raw, err := log.Read(func(ev *audit.Event) bool { return ev.Stage == audit.StageToolCall }, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]audit.Event, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestBashToolRunsAsACommand: RunTool registers a bash call as a command
// of its workspace, so Delete cancels it; once the service shuts down a
// bash call is refused as ErrUnavailable without running, while a call
// that is not a command still runs.
func TestBashToolRunsAsACommand(t *testing.T) {
	svc, w, _ := localWorkspace(t, nil, nil)
	ctx := t.Context()
	marker := filepath.Join(w.Info().Root, "started")
	done := make(chan tools.Result, 1)
	go func() {
		res, err := svc.RunTool(ctx, w, 1, "bash", []byte(`{"command":"touch started; sleep 60"}`), nil)
		if err != nil {
			t.Errorf("bash: %v", err)
		}
		done <- res
	}()
	deadline := time.Now().Add(20 * time.Second)
	for _, err := os.Stat(marker); err != nil; _, err = os.Stat(marker) {
		if time.Now().After(deadline) {
			t.Fatal("bash never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := svc.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if !res.IsError {
			t.Errorf("a cancelled bash call is not an error: %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Delete did not cancel the running bash call")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("cancelling took %s", d)
	}

	svc, w, _ = localWorkspace(t, nil, nil)
	if err := svc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := svc.RunTool(ctx, w, 1, "bash", []byte(`{"command":"touch ran"}`), nil)
	if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("bash after Shutdown: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.Info().Root, "ran")); !os.IsNotExist(err) {
		t.Errorf("a refused bash call ran: %v", err)
	}
	if res := mustRun(t, svc, ctx, w, 2, "write", []byte(`{"path":"a.txt","content":"a"}`)); res.IsError {
		t.Errorf("write after Shutdown: %+v", res)
	}
}

// sequential runs a batch's calls one after the other.
func sequential(run func(int), n int) {
	for i := range n {
		run(i)
	}
}

// TestBatchWithBashIsOneCommand: a batch holding a bash call is refused
// whole while the service shuts down, so none of its calls runs; one
// without runs; and each call is numbered, refused or run as it says.
func TestBatchWithBashIsOneCommand(t *testing.T) {
	svc, w, log := localWorkspace(t, nil, nil)
	ctx := t.Context()
	calls := []workspaces.ToolCall{
		{Name: "write", Args: []byte(`{"path":"a.txt","content":"a"}`)},
		{Name: "bash", Args: []byte(`{"command":"cat a.txt"}`)},
		{Name: "ls", Args: []byte(`{}`), Refused: &workspaces.LimitError{Rule: "rate", Reason: "over", RetryAfter: time.Second}},
	}
	res, err := svc.RunBatch(ctx, w, calls, func(run func(int)) { sequential(run, len(calls)) })
	if err != nil {
		t.Fatal(err)
	}
	if res[0].IsError || res[1].IsError || res[1].Content[0].Text != "a" {
		t.Fatalf("batch: %+v", res)
	}
	if !res[2].IsError || !strings.HasPrefix(res[2].Content[0].Text, "Blocked by rate limit: over.") {
		t.Fatalf("refused call: %+v", res[2])
	}
	recs := records(t, log)
	if len(recs) != 3 || !strings.HasSuffix(recs[0].AuditID, "/1") || recs[2].Decision != "deny" || recs[2].Rule != "rate" {
		t.Fatalf("audit records: %+v", recs)
	}

	if err := svc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	calls[0].Args = []byte(`{"path":"b.txt","content":"b"}`)
	if _, err := svc.RunBatch(ctx, w, calls, func(run func(int)) { sequential(run, len(calls)) }); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("batch with bash after Shutdown: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.Info().Root, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("a call of a refused batch ran: %v", err)
	}
	res, err = svc.RunBatch(ctx, w, calls[:1], func(run func(int)) { sequential(run, 1) })
	if err != nil || res[0].IsError {
		t.Fatalf("batch without bash after Shutdown: %+v %v", res, err)
	}
}

// TestToolCallDecisions: a denied call is an isError result naming the
// rule, audited as a denial; a tool's own error is kept as its result; a
// secret the policy names is redacted from updates and the
// result; and every call leaves one record.
func TestToolCallDecisions(t *testing.T) {
	pol, err := policy.Parse([]byte("commands:\n  deny: [\"rm *\"]\npaths:\n  write:\n    deny: [\"locked/**\"]\n" +
		"redact:\n  - name: token\n    pattern: \"s3cr3t-[0-9a-z]+\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-v4lue0123"
	svc, w, log := localWorkspace(t, pol, nil)
	ctx := t.Context()

	res := mustRun(t, svc, ctx, w, 1, "bash", []byte(`{"command":"rm x"}`))
	if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "Blocked by policy: ") {
		t.Fatalf("denied command: %+v", res)
	}
	res = mustRun(t, svc, ctx, w, 2, "write", []byte(`{"path":"locked/a","content":"x"}`))
	if !res.IsError || !strings.Contains(res.Content[0].Text, "locked/**") {
		t.Fatalf("denied path: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(w.Info().Root, "locked")); !os.IsNotExist(err) {
		t.Errorf("a denied write ran: %v", err)
	}
	res = mustRun(t, svc, ctx, w, 3, "read", []byte(`{"path":"missing.txt"}`))
	if !res.IsError || !strings.Contains(res.Content[0].Text, "missing.txt") {
		t.Fatalf("read of a missing file: %+v", res)
	}
	var updates []string
	res, err = svc.RunTool(ctx, w, 4, "bash", []byte(`{"command":"echo token=s3cr3t-v4lue0123; sleep 0.2; echo done"}`), func(u tools.Result) {
		for _, c := range u.Content {
			updates = append(updates, c.Text)
		}
	})
	if err != nil || res.IsError {
		t.Fatalf("bash: %+v %v", res, err)
	}
	out, _ := json.Marshal(res)
	if strings.Contains(string(out), secret) || !strings.Contains(res.Content[0].Text, "token=[REDACTED:token]") {
		t.Errorf("the secret left in the result: %s", out)
	}
	if strings.Contains(strings.Join(updates, "\n"), secret) {
		t.Errorf("the secret left in an update: %q", updates)
	}

	recs := records(t, log)
	if len(recs) != 4 {
		t.Fatalf("%d records for 4 calls: %+v", len(recs), recs)
	}
	if recs[0].Decision != "deny" || recs[0].Rule != "commands" || recs[1].Decision != "deny" || recs[1].Rule != "paths.write" {
		t.Errorf("denials recorded as %+v and %+v", recs[0], recs[1])
	}
	if recs[2].Decision != "allow" || recs[2].Result == nil || recs[2].Result.IsError == nil || !*recs[2].Result.IsError {
		t.Errorf("a tool's error recorded as %+v", recs[2])
	}
	if strings.Contains(recs[3].Args.Command, secret) {
		t.Errorf("the secret left in the audit record: %+v", recs[3].Args)
	}
}
