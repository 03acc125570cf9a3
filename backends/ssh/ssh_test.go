package ssh_test

import (
	"context"
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/opsapi"
)

func TestConformance(t *testing.T) {
	srv := sshtest.Start(t)
	b := newBackend(t, srv)
	backendtest.Run(t, backendtest.Options{Confined: false, New: func(t *testing.T) opsapi.Workspace {
		ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "c", Options: rootOpts(srv, srv.WorkDir(t)+"/ws")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // t.Context is canceled before cleanups run
			if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
				t.Error(err)
			}
		})
		return ws
	}})
}
