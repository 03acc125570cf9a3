package opsapi

import (
	"context"
	"encoding/json"
)

// WorkspaceSpec asks a backend for a new workspace.
type WorkspaceSpec struct {
	// ID names the workspace; the broker makes it random and unguessable.
	ID string
	// Options are the backend's own creation options as JSON (e.g. an image
	// and limits for docker); nil means the backend's defaults. Unknown
	// fields are ErrInvalid.
	Options json.RawMessage
	// Owner is the tenant the workspace is made for. A backend whose engine
	// can hold it with the workspace (a container label) keeps it there, so
	// a broker that lost its own record still knows the owner
	// (OwnerReporter).
	Owner string
}

// Backend creates workspaces of one kind (local, docker, ssh, kubernetes).
type Backend interface {
	// Name is the backend's registry name, e.g. "local".
	Name() string
	// Create makes a new workspace. Invalid options are ErrInvalid, an
	// existing ID ErrExist, an engine that cannot be reached
	// ErrUnavailable.
	Create(ctx context.Context, spec WorkspaceSpec) (Workspace, error)
	// Close releases the backend's own resources; workspaces stay.
	Close() error
}
