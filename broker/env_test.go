package broker_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/wire"
)

const secretValue = "s3cr3t-value-4f9a"

// TestWorkspaceEnvReachesEveryCommandAndSecretsAreRedacted: the
// workspace's variables reach exec, the bash tool and background
// processes; a request's own env wins; a secret's value leaves the broker
// nowhere: not in outputs, answers, logs or the audit trail.
func TestWorkspaceEnvReachesEveryCommandAndSecretsAreRedacted(t *testing.T) {
	state := t.TempDir()
	envFile := filepath.Join(state, "env.json")
	e := newEnvAt(t, state, func(c *broker.Config) { c.EnvFile = envFile })
	var ws wire.WorkspaceInfo
	e.must(http.StatusCreated, "POST", "/v1/workspaces", map[string]any{"env": []map[string]any{
		{"name": "PLAIN", "value": "plain value"},
		{"name": "TOKEN", "value": secretValue, "secret": true},
		{"name": "OVERRIDDEN", "value": "workspace's"},
	}}, &ws)
	if got, _ := json.Marshal(ws.Env); string(got) != `[{"name":"PLAIN"},{"name":"TOKEN","secret":true},{"name":"OVERRIDDEN"}]` {
		t.Fatalf("the workspace shows env %s", got)
	}
	out, last := e.exec(ws, map[string]any{"command": `echo "$PLAIN|$TOKEN|$OVERRIDDEN"`, "env": []string{"OVERRIDDEN=request's"}})
	if string(out) != "plain value|[REDACTED:TOKEN]|request's\n" || last.ExitCode != 0 {
		t.Fatalf("exec output %q", out)
	}
	body := e.must(http.StatusOK, "POST", "/v1/workspaces/"+ws.ID+"/tools/bash", map[string]any{"command": `echo "$PLAIN $TOKEN"`}, nil)
	if !strings.Contains(string(body), "plain value [REDACTED:TOKEN]") {
		t.Fatalf("bash tool result %s", body)
	}
	var p wire.BackgroundProcess
	e.must(http.StatusCreated, "POST", "/v1/workspaces/"+ws.ID+"/processes", map[string]any{"command": `echo "$TOKEN"`}, &p)
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/processes/"+p.ID+"/wait?timeout=30", nil, &p)
	logs := e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/processes/"+p.ID+"/logs", nil, nil)
	var line wire.LogLine
	_ = json.Unmarshal([]byte(strings.SplitN(string(logs), "\n", 2)[0]), &line)
	if string(line.Data) != "[REDACTED:TOKEN]\n" {
		t.Fatalf("background log %s", logs)
	}
	info := e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID, nil, nil)
	for what, text := range map[string]string{"the workspace's info": string(info), "the broker's log": e.logs.String()} {
		if strings.Contains(text, secretValue) || strings.Contains(text, "plain value") {
			t.Fatalf("%s holds a value: %s", what, text)
		}
	}
	if fi, err := os.Stat(envFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("env file: %v, %v", fi, err)
	}

	// PUT replaces it all; a restarted broker keeps it.
	e.must(http.StatusOK, "PUT", "/v1/workspaces/"+ws.ID+"/env", map[string]any{"env": []map[string]any{{"name": "ONLY", "value": "this"}}}, &ws)
	second := newEnvAt(t, state, func(c *broker.Config) { c.EnvFile = envFile })
	out, _ = second.exec(ws, map[string]any{"command": `echo "${PLAIN-unset} $ONLY"`})
	if string(out) != "unset this\n" {
		t.Fatalf("after PUT and a restart: %q", out)
	}
	second.must(http.StatusOK, "PUT", "/v1/workspaces/"+ws.ID+"/env", map[string]any{"env": []any{}}, &ws)
	if out, _ := second.exec(ws, map[string]any{"command": `echo "${ONLY-unset}"`}); string(out) != "unset\n" {
		t.Fatalf("after an empty PUT: %q", out)
	}
	second.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	if b, _ := os.ReadFile(envFile); strings.Contains(string(b), ws.ID) {
		t.Fatalf("the deleted workspace's env is still kept: %s", b)
	}
}

// TestWorkspaceEnvIsChecked: names no command could take, the broker's own
// prefix, duplicates and NULs are 400 and no workspace is made.
func TestWorkspaceEnvIsChecked(t *testing.T) {
	e := newEnv(t, nil)
	for _, bad := range [][]map[string]any{
		{{"name": "1BAD", "value": "x"}},
		{{"name": "A=B", "value": "x"}},
		{{"name": "WSBROKER_CALL", "value": "x"}},
		{{"name": "A", "value": "x"}, {"name": "A", "value": "y"}},
		{{"name": "A", "value": "x\x00y"}},
		{{"name": "A", "value": strings.Repeat("v", 65<<10)}},
	} {
		e.problem(http.StatusBadRequest, "invalid", "POST", "/v1/workspaces", map[string]any{"env": bad})
	}
	var list wire.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("refused creates made workspaces: %+v", list.Workspaces)
	}
	ws := e.workspace()
	e.problem(http.StatusBadRequest, "invalid", "PUT", "/v1/workspaces/"+ws.ID+"/env", map[string]any{"env": []map[string]any{{"name": "", "value": "x"}}})
}
