package wire

import (
	"encoding/json"
	"time"
)

// CreateRequest is the body of POST /v1/workspaces.
type CreateRequest struct {
	// Backend names the backend; empty means the broker's default.
	Backend string `json:"backend,omitempty"`
	// Options are the backend's own creation options; nil means defaults.
	Options json.RawMessage `json:"options,omitempty"`
}

// WorkspaceInfo describes a workspace: the answer to POST /v1/workspaces
// and GET /v1/workspaces/{id}.
type WorkspaceInfo struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	// Root is the absolute POSIX path relative paths resolve against.
	Root      string    `json:"root"`
	CreatedAt time.Time `json:"createdAt"`
	// Gone, when set, says why the workspace's sandbox vanished behind the
	// broker's back (e.g. its container was removed with the engine's own
	// tools): calls answer not_found, and it can only be deleted.
	Gone string `json:"gone,omitempty"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
}
