package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// Processes lists the workspace's live processes (GET /processes). A
// backend that cannot list them answers opsapi.ErrNotExist.
func (w *Workspace) Processes(ctx context.Context) ([]opsapi.Process, error) {
	var out wire.ProcessList
	if err := w.c.doJSON(ctx, http.MethodGet, wsPath(w.id, "/processes"), nil, nil, &out); err != nil {
		return nil, err
	}
	if out.Processes == nil {
		// The broker leaves the list out when the backend cannot make it.
		return nil, opsapi.E("client.Processes", "", opsapi.ErrNotExist, errors.New("the workspace's backend cannot list its processes"))
	}
	return out.Processes, nil
}

// KillProcesses kills the given processes, or all of the workspace's when
// pids is empty (DELETE /processes), and returns how many were killed.
func (w *Workspace) KillProcesses(ctx context.Context, pids []int) (int, error) {
	q := url.Values{}
	for _, p := range pids {
		q.Add("pid", strconv.Itoa(p))
	}
	var out wire.KillResult
	err := w.c.doJSON(ctx, http.MethodDelete, wsPath(w.id, "/processes"), q, nil, &out)
	return out.Killed, err
}

var _ opsapi.ProcessManager = (*Workspace)(nil)
