package wire

import (
	"encoding/json"

	"github.com/wsbroker/wsbroker/opsapi"
)

// The raw operations' bodies. GET /files and PUT /files carry the file's
// bytes as they are; /glob and /search take opsapi.GlobRequest and
// opsapi.SearchRequest and answer opsapi.GlobResult and
// opsapi.SearchResult, which already are wire forms.

// StatResponse is the body of GET /stat: opsapi.FileInfo plus the image
// type sniffed from the file's first bytes.
type StatResponse struct {
	opsapi.FileInfo
	MIME string `json:"mime,omitempty"`
}

// RealPathResponse is the body of GET /realpath.
type RealPathResponse struct {
	Path string `json:"path"`
}

// DirList is the body of GET /dirs, sorted by name.
type DirList struct {
	Entries []opsapi.FileInfo `json:"entries"`
	// Hidden counts the entries the caller's policy left out.
	Hidden int `json:"hidden,omitempty"`
}

// ProcessList is the body of GET /processes: the workspace's processes
// as its backend lists them (absent where it cannot), and its background
// processes.
type ProcessList struct {
	Processes  []opsapi.Process    `json:"processes,omitzero"`
	Background []BackgroundProcess `json:"background"`
}

// KillResult is the body of DELETE /processes.
type KillResult struct {
	Killed int `json:"killed"`
}

// AuditList is the body of GET /v1/audit: the newest records, oldest
// first, each exactly as written (with its hash).
type AuditList struct {
	Records []json.RawMessage `json:"records"`
}
