package broker_test

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/wire"
)

func TestProcessesRoutes(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	base := "/v1/workspaces/" + ws.ID + "/processes"
	e.exec(ws, map[string]any{"command": "sleep 600 >/dev/null 2>&1 & echo started", "timeout": 10})

	var list wire.ProcessList
	var pid int
	for end := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		e.must(http.StatusOK, "GET", base, nil, &list)
		for _, p := range list.Processes {
			if strings.Contains(p.Command, "sleep 600") {
				pid = p.PID
			}
		}
	}
	if pid == 0 {
		t.Fatalf("the background sleep is not listed: %+v", list)
	}
	e.problem(http.StatusBadRequest, "bad_request", "DELETE", base+"?pid=x", nil)
	// Not the workspace's: refused as not found, nothing killed.
	e.problem(http.StatusNotFound, "not_exist", "DELETE", base+"?pid="+strconv.Itoa(os.Getpid()), nil)

	var killed wire.KillResult
	e.must(http.StatusOK, "DELETE", base+"?pid="+strconv.Itoa(pid), nil, &killed)
	if killed.Killed != 1 {
		t.Fatalf("killed %+v, want 1", killed)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e.must(http.StatusOK, "GET", base, nil, &list)
		if len(list.Processes) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("still listed after the kill: %+v", list)
		}
	}
	e.must(http.StatusOK, "DELETE", base, nil, &killed)
}
