package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// Workspace is one of the broker's workspaces seen through the wire. It
// implements every opsapi interface, so the tools (or a host's own tool
// code) can run over it exactly as over a local workspace. It is safe for
// concurrent use.
type Workspace struct {
	c  *Client
	id string

	mu   sync.Mutex
	root string // "" until known
}

// Every opsapi interface, checked at compile time.
var (
	_ opsapi.Workspace       = (*Workspace)(nil)
	_ opsapi.Operations      = (*Workspace)(nil)
	_ opsapi.ReadOperations  = (*Workspace)(nil)
	_ opsapi.WriteOperations = (*Workspace)(nil)
	_ opsapi.EditOperations  = (*Workspace)(nil)
	_ opsapi.BashOperations  = (*Workspace)(nil)
	_ opsapi.GrepOperations  = (*Workspace)(nil)
	_ opsapi.FindOperations  = (*Workspace)(nil)
	_ opsapi.LsOperations    = (*Workspace)(nil)
	_ opsapi.Resolver        = (*Workspace)(nil)
	_ opsapi.Destroyer       = (*Workspace)(nil)
)

// Workspace returns a handle on workspace id. It does no I/O; the root is
// fetched on first use of Root.
func (c *Client) Workspace(id string) *Workspace {
	return &Workspace{c: c, id: id}
}

// WorkspaceFor returns a handle on the workspace info describes, with its
// root already known.
func (c *Client) WorkspaceFor(info wire.WorkspaceInfo) *Workspace {
	return &Workspace{c: c, id: info.ID, root: info.Root}
}

// ID is the workspace's id.
func (w *Workspace) ID() string { return w.id }

// Info fetches the workspace's description and remembers its root.
func (w *Workspace) Info(ctx context.Context) (wire.WorkspaceInfo, error) {
	info, err := w.c.GetWorkspace(ctx, w.id)
	if err == nil {
		w.mu.Lock()
		w.root = info.Root
		w.mu.Unlock()
	}
	return info, err
}

// rootFetchTimeout bounds the lazy fetch in Root, which has no context.
const rootFetchTimeout = 30 * time.Second

// Root is the workspace's root as the broker reports it. When it is not
// known yet it is fetched once (bounded by 30 s); if that fails, Root
// returns "" and tries again on the next call.
func (w *Workspace) Root() string {
	w.mu.Lock()
	root := w.root
	w.mu.Unlock()
	if root != "" {
		return root
	}
	ctx, cancel := context.WithTimeout(context.Background(), rootFetchTimeout)
	defer cancel()
	info, err := w.Info(ctx)
	if err != nil {
		return ""
	}
	return info.Root
}

// pathQuery is the query for a path-addressed operation.
func pathQuery(p string) url.Values {
	return url.Values{"path": {p}}
}

// Open streams the file at path; the body is not buffered, so a large file
// costs no memory here. Reading fails with ErrCanceled or ErrTimeout once
// ctx ends, and with ErrUnavailable if the broker drops the stream.
func (w *Workspace) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := w.c.newRequest(ctx, http.MethodGet, wsPath(w.id, "/files"), pathQuery(path), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := w.c.send(req) //nolint:bodyclose // the caller closes it through the returned reader
	if err != nil {
		return nil, err
	}
	return &bodyReader{ctx: ctx, path: path, rc: resp.Body}, nil
}

// bodyReader classifies errors met while streaming a response body.
type bodyReader struct {
	ctx  context.Context
	path string
	rc   io.ReadCloser
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		if cerr := b.ctx.Err(); cerr != nil {
			err = opsapi.E("client.Open", b.path, nil, cerr)
		} else {
			err = opsapi.E("client.Open", b.path, opsapi.ErrUnavailable, err)
		}
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.rc.Close() }

// accessParam is the wire form of an access mode.
func accessParam(mode opsapi.AccessMode) string {
	switch {
	case mode&opsapi.AccessRead != 0 && mode&opsapi.AccessWrite != 0:
		return "rw"
	case mode&opsapi.AccessWrite != 0:
		return "w"
	}
	return "r"
}

// Access checks that path exists and allows mode (GET stat?access=).
func (w *Workspace) Access(ctx context.Context, path string, mode opsapi.AccessMode) error {
	q := pathQuery(path)
	q.Set("access", accessParam(mode))
	return w.c.doJSON(ctx, http.MethodGet, wsPath(w.id, "/stat"), q, nil, nil)
}

// Stat describes path, following symbolic links.
func (w *Workspace) Stat(ctx context.Context, path string) (opsapi.FileInfo, error) {
	var fi opsapi.FileInfo
	err := w.c.doJSON(ctx, http.MethodGet, wsPath(w.id, "/stat"), pathQuery(path), nil, &fi)
	return fi, err
}

// ReadDir lists the entries of the directory at path.
func (w *Workspace) ReadDir(ctx context.Context, path string) ([]opsapi.FileInfo, error) {
	entries, _, err := w.ReadDirHiding(ctx, path)
	return entries, err
}

// ReadDirHiding is ReadDir, plus how many entries the tenant's policy
// left out.
func (w *Workspace) ReadDirHiding(ctx context.Context, path string) ([]opsapi.FileInfo, int, error) {
	var out wire.DirList
	err := w.c.doJSON(ctx, http.MethodGet, wsPath(w.id, "/dirs"), pathQuery(path), nil, &out)
	return out.Entries, out.Hidden, err
}

// Mkdir creates path and its missing parents.
func (w *Workspace) Mkdir(ctx context.Context, path string) error {
	return w.c.doJSON(ctx, http.MethodPost, wsPath(w.id, "/dirs"), pathQuery(path), nil, nil)
}

// RealPath is path with every symbolic link resolved.
func (w *Workspace) RealPath(ctx context.Context, path string) (string, error) {
	var out wire.RealPathResponse
	err := w.c.doJSON(ctx, http.MethodGet, wsPath(w.id, "/realpath"), pathQuery(path), nil, &out)
	return out.Path, err
}

// Glob finds files by glob on the broker.
func (w *Workspace) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	var res opsapi.GlobResult
	err := w.c.doJSON(ctx, http.MethodPost, wsPath(w.id, "/glob"), nil, req, &res)
	return res, err
}

// Search runs a content search on the broker.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	var res opsapi.SearchResult
	err := w.c.doJSON(ctx, http.MethodPost, wsPath(w.id, "/search"), nil, req, &res)
	return res, err
}

// Destroy deletes the workspace on the broker. A workspace that is already
// gone is not an error.
func (w *Workspace) Destroy(ctx context.Context) error {
	err := w.c.DeleteWorkspace(ctx, w.id)
	if errors.Is(err, opsapi.ErrNotExist) {
		return nil
	}
	return err
}

// SetEnv replaces the workspace's environment (PUT /env): every command
// started from then on sees vars. The answer names them, never values.
func (w *Workspace) SetEnv(ctx context.Context, vars []wire.EnvVar) (wire.WorkspaceInfo, error) {
	if vars == nil {
		vars = []wire.EnvVar{}
	}
	var info wire.WorkspaceInfo
	err := w.c.doJSON(ctx, http.MethodPut, wsPath(w.id, "/env"), nil, wire.EnvRequest{Env: vars}, &info)
	return info, err
}
