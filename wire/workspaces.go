package wire

import (
	"encoding/json"
	"time"
)

// CreateRequest is the body of POST /v1/workspaces.
type CreateRequest struct {
	// Profile names a workspace spec configured on the broker, instead
	// of Backend and Options (giving both is a bad request).
	Profile string `json:"profile,omitempty"`
	// Backend names the backend; empty means the broker's default.
	Backend string `json:"backend,omitempty"`
	// Options are the backend's own creation options; nil means defaults.
	Options json.RawMessage `json:"options,omitempty"`
	// Env is the workspace's environment: every command sees it.
	Env []EnvVar `json:"env,omitempty"`
}

// EnvVar is a variable of a workspace's environment (in a create request
// and PUT /env). A secret's value is redacted from every output.
type EnvVar struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Secret bool   `json:"secret,omitempty"`
}

// EnvRequest is the body of PUT /v1/workspaces/{id}/env: the workspace's
// whole new environment.
type EnvRequest struct {
	Env []EnvVar `json:"env"`
}

// EnvName is a variable of a workspace's environment as the broker shows
// it: values are never answered.
type EnvName struct {
	Name   string `json:"name"`
	Secret bool   `json:"secret,omitempty"`
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
	// Confinement is what confines the workspace's commands on this host,
	// layer by layer; absent for a backend that does not report it.
	Confinement *Confinement `json:"confinement,omitempty"`
	// Transport is how calls reach the workspace (docker and ssh):
	// through the in-box agent or the fallback; absent for a backend
	// without an agent.
	Transport *Transport `json:"transport,omitempty"`
	// Disk is the workspace's own filesystem, whose size the kernel
	// holds; absent for a workspace without one (see docs/tenancy.md).
	Disk *Disk `json:"disk,omitempty"`
	// Env names the variables of the workspace's environment.
	Env []EnvName `json:"env,omitempty"`
}

// Disk is a workspace's own filesystem (opsapi.Disk).
type Disk struct {
	// UsedBytes counts files and the filesystem's own structures.
	UsedBytes  int64 `json:"usedBytes"`
	LimitBytes int64 `json:"limitBytes"`
}

// Transport says whether a workspace's calls go through the in-box agent
// (opsapi.Transport).
type Transport struct {
	// Agent: through the in-box agent; false: through the backend's
	// fallback (the engine's exec, an SSH session per command).
	Agent bool `json:"agent"`
	// Detail says why the fallback is in use, or that the agent starts
	// at the first call.
	Detail string `json:"detail,omitempty"`
}

// Confinement is a workspace's effective confinement
// (opsapi.Confinement): each field says whether a layer holds.
type Confinement struct {
	// Sandboxed: commands start through the backend's sandbox at all.
	Sandboxed bool `json:"sandboxed"`
	// User: commands run as the workspace's own unprivileged uid (UID).
	User bool `json:"user"`
	UID  int  `json:"uid,omitempty"`
	// NoNewPrivs: setuid binaries and file capabilities grant nothing.
	NoNewPrivs bool `json:"noNewPrivs"`
	// PrivateTmp: /tmp and /dev/shm are the workspace's own and the
	// broker's state directory is hidden.
	PrivateTmp bool `json:"privateTmp"`
	// Network is "none" (a namespace of its own, loopback only) or "host".
	Network string `json:"network"`
	// LandlockABI is the Landlock ABI in force, 0 for none.
	LandlockABI int `json:"landlockABI"`
	// Seccomp: the filter denying kernel-surface calls is installed.
	Seccomp bool `json:"seccomp"`
	// PIDNamespace: commands see only their own processes.
	PIDNamespace bool `json:"pidNamespace"`
	// Cgroup: the workspace's processes are held, limited and killed as
	// one cgroup.
	Cgroup bool `json:"cgroup"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
}

// ArchiveReport is what a tar moved in or out of a workspace: the answer
// to PUT /archive, and the Wsbroker-Archive-Report trailer of GET
// /archive.
type ArchiveReport struct {
	Files int   `json:"files"`
	Dirs  int   `json:"dirs"`
	Links int   `json:"links"`
	Bytes int64 `json:"bytes"` // file content
	// Refused are the entries that did not land (or were left out), each
	// with why.
	Refused []ArchiveRefusal `json:"refused"`
}

// ArchiveRefusal is one entry that did not land, and why.
type ArchiveRefusal struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}
