package ssh_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/opsapi"
)

func TestConformance(t *testing.T) {
	srv := sshtest.Start(t)
	b := newBackend(t, srv)
	backendtest.Run(t, backendtest.Options{Confined: false, New: func(t *testing.T) opsapi.Workspace {
		spec := opsapi.WorkspaceSpec{ID: "c", Options: rootOpts(srv, srv.WorkDir(t)+"/ws")}
		return backendtest.Create(t, b, spec)
	}})
}
