package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Processes lists the workspace's live processes (GET /processes). A
// backend that cannot list them answers opsapi.ErrNotExist.
func (w *Workspace) Processes(ctx context.Context) ([]opsapi.Process, error) {
	var out struct {
		Processes []opsapi.Process `json:"processes"`
	}
	err := w.c.doJSON(ctx, http.MethodGet, wsPath(w.id, "/processes"), nil, nil, &out)
	return out.Processes, err
}

// KillProcesses kills the given processes, or all of the workspace's when
// pids is empty (DELETE /processes), and returns how many were killed.
func (w *Workspace) KillProcesses(ctx context.Context, pids []int) (int, error) {
	q := url.Values{}
	for _, p := range pids {
		q.Add("pid", strconv.Itoa(p))
	}
	var out struct {
		Killed int `json:"killed"`
	}
	err := w.c.doJSON(ctx, http.MethodDelete, wsPath(w.id, "/processes"), q, nil, &out)
	return out.Killed, err
}

var _ opsapi.ProcessManager = (*Workspace)(nil)
