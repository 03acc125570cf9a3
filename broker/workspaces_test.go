//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

var idPattern = regexp.MustCompile(`^ws_[a-z2-7]{26}$`)

func TestWorkspaceLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	resp, data := e.do("POST", "/v1/workspaces", map[string]any{"backend": "local"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	var ws wire.WorkspaceInfo
	e.must(http.StatusOK, "GET", resp.Header.Get("Location"), nil, &ws)
	if !idPattern.MatchString(ws.ID) || ws.Backend != "local" || ws.Root == "" || ws.CreatedAt.IsZero() {
		t.Fatalf("workspace %+v", ws)
	}
	if time.Since(ws.CreatedAt) > time.Minute {
		t.Errorf("createdAt %v", ws.CreatedAt)
	}
	if fi, err := os.Stat(ws.Root); err != nil || !fi.IsDir() {
		t.Fatalf("root %s: %v", ws.Root, err)
	}

	// A second one (backend defaulted); ids are distinct; list is ordered.
	other := e.workspace()
	if other.ID == ws.ID || other.Root == ws.Root {
		t.Fatalf("two workspaces share %s / %s", other.ID, other.Root)
	}
	var list wire.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 2 || list.Workspaces[0].ID != ws.ID || list.Workspaces[1].ID != other.ID {
		t.Fatalf("list %+v", list)
	}

	writeHost(t, ws, "data.txt", "payload")
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	if _, err := os.Stat(ws.Root); !os.IsNotExist(err) {
		t.Errorf("root still exists after DELETE: %v", err)
	}
	e.problem(http.StatusNotFound, "not_found", "GET", "/v1/workspaces/"+ws.ID, nil)
	e.problem(http.StatusNotFound, "not_found", "DELETE", "/v1/workspaces/"+ws.ID, nil)
	e.problem(http.StatusNotFound, "not_found", "GET", wsPath(ws, "/files", "data.txt"), nil)
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != other.ID {
		t.Fatalf("list after delete %+v", list)
	}
}

func TestWorkspaceCreateBadInput(t *testing.T) {
	e := newEnv(t, nil)
	p := e.problem(http.StatusBadRequest, "invalid", "POST", "/v1/workspaces", map[string]any{"backend": "nope"})
	if p.Detail != `create: unknown backend "nope"` {
		t.Errorf("detail %q", p.Detail)
	}
	p = e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces", `{"backend":"local","size":3}`)
	if p.Detail != `bad request: unknown field "size"` {
		t.Errorf("detail %q", p.Detail)
	}
	p = e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces", `{"backend":7}`)
	if p.Detail != `bad request: field "backend": expected string, got JSON number at offset 12` {
		t.Errorf("detail %q", p.Detail)
	}
	e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces", `{"backend":"local"`)
	e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces", ``)
	e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces", `{} {}`)
	// The backend's own validation of its options.
	e.problem(http.StatusBadRequest, "invalid", "POST", "/v1/workspaces", `{"options":{"unknownOption":1}}`)
	var list wire.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("refused creates left workspaces: %+v", list)
	}
	_, data := e.do("GET", "/v1/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil)
	golden(t, "problem_unknown_workspace", data)
}

// TestRediscover: a broker restarted over the same state finds the
// workspaces again, with their files.
func TestRediscover(t *testing.T) {
	state := t.TempDir()
	first := newEnvAt(t, state, nil)
	if _, ok := any(first.backend).(opsapi.Rediscoverer); !ok {
		t.Skip("the local backend does not implement opsapi.Rediscoverer")
	}
	ws := first.workspace()
	writeHost(t, ws, "keep.txt", "kept")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := first.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	first.hs.Close()
	_ = first.backend.Close()

	second := newEnvAt(t, state, nil)
	var got wire.WorkspaceInfo
	second.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID, nil, &got)
	if got.Root != ws.Root || got.Backend != "local" {
		t.Errorf("rediscovered %+v, want root %s", got, ws.Root)
	}
	if body := second.must(http.StatusOK, "GET", wsPath(ws, "/files", "keep.txt"), nil, nil); string(body) != "kept" {
		t.Errorf("file after restart: %q", body)
	}
}
