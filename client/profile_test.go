package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
)

// TestCreateWithProfile: Create passes a profile the broker resolves; an
// unknown one, or one with a backend, comes back as opsapi.ErrInvalid
// naming it.
func TestCreateWithProfile(t *testing.T) {
	c, _ := startBroker(t, broker.Config{Profiles: map[string]workspaces.Profile{"plain": {Backend: "local"}}})
	ctx := context.Background()
	info, err := c.Create(ctx, wire.CreateRequest{Profile: "plain", Env: []wire.EnvVar{{Name: "A", Value: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.WorkspaceFor(info).Destroy(context.Background()) })
	if info.Backend != "local" || len(info.Env) != 1 || info.Env[0].Name != "A" {
		t.Fatalf("created %+v", info)
	}
	for req, want := range map[*wire.CreateRequest]string{
		{Profile: "nosuch"}:                  `no profile "nosuch" is configured`,
		{Profile: "plain", Backend: "local"}: `profile "plain" was given with a backend or options`,
	} {
		_, err := c.Create(ctx, *req)
		if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: err = %v, want invalid %q", *req, err, want)
		}
	}
	list, err := c.ListWorkspaces(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
}
