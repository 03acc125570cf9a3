//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

func TestFiles(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()

	bin := []byte("a\x00b\xff\nline two\r\n")
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "bin.dat"), bin, nil)
	if got := readHost(t, ws, "bin.dat"); got != string(bin) {
		t.Fatalf("host file %q", got)
	}
	resp, body := e.do("GET", wsPath(ws, "/files", "bin.dat"), nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, bin) || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("GET: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	// An absolute path inside the root works too.
	if got := e.must(200, "GET", wsPath(ws, "/files", ws.Root+"/bin.dat"), nil, nil); !bytes.Equal(got, bin) {
		t.Fatalf("absolute GET %q", got)
	}

	// Big files stream both ways unchanged.
	big := make([]byte, 5<<20+3)
	_, _ = rand.Read(big)
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "big.bin"), big, nil)
	if got := e.must(200, "GET", wsPath(ws, "/files", "big.bin"), nil, nil); !bytes.Equal(got, big) {
		t.Fatalf("big file differs (%d bytes back)", len(got))
	}
	// Empty file.
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "empty"), []byte{}, nil)
	if got := e.must(200, "GET", wsPath(ws, "/files", "empty"), nil, nil); len(got) != 0 {
		t.Fatalf("empty file gave %q", got)
	}

	// Parents: missing without mkdirs, made with it.
	e.problem(http.StatusNotFound, "not_exist", "PUT", wsPath(ws, "/files", "x/y/z.txt"), "z")
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "x/y/z.txt")+"&mkdirs=1", "z", nil)
	if readHost(t, ws, "x/y/z.txt") != "z" {
		t.Fatal("mkdirs write missing")
	}
	e.problem(http.StatusBadRequest, "invalid", "PUT", wsPath(ws, "/files", "q.txt")+"&mkdirs=maybe", "q")

	e.problem(http.StatusNotFound, "not_exist", "GET", wsPath(ws, "/files", "missing"), nil)
	e.problem(http.StatusConflict, "is_dir", "GET", wsPath(ws, "/files", "x"), nil)
	e.problem(http.StatusConflict, "is_dir", "PUT", wsPath(ws, "/files", "x"), "data")

	// Bad paths.
	e.problem(http.StatusBadRequest, "invalid", "GET", "/v1/workspaces/"+ws.ID+"/files", nil)
	e.problem(http.StatusBadRequest, "invalid", "GET", wsPath(ws, "/files", "a\x00b"), nil)
	e.problem(http.StatusBadRequest, "invalid", "GET", wsPath(ws, "/files", "a")+"&path=b", nil)
	e.problem(http.StatusBadRequest, "invalid", "PUT", wsPath(ws, "/files", "a\x00b"), "x")
}

// TestConfinement: the local backend refuses paths outside the root, and
// the refusal reaches the client as a permission problem with nothing
// written outside.
func TestConfinement(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	canary := filepath.Join(filepath.Dir(ws.Root), "canary.txt")
	if err := os.WriteFile(canary, []byte("canary"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../canary.txt", "a/../../canary.txt", canary, "/etc/passwd"} {
		e.problem(http.StatusForbidden, "permission", "GET", wsPath(ws, "/files", p), nil)
		e.problem(http.StatusForbidden, "permission", "PUT", wsPath(ws, "/files", p), "owned")
		e.problem(http.StatusForbidden, "permission", "GET", wsPath(ws, "/stat", p), nil)
	}
	if err := os.Symlink(canary, hostPath(ws, "leak")); err != nil {
		t.Fatal(err)
	}
	e.problem(http.StatusForbidden, "permission", "GET", wsPath(ws, "/files", "leak"), nil)
	e.problem(http.StatusForbidden, "permission", "PUT", wsPath(ws, "/files", "leak"), "owned")
	if b, _ := os.ReadFile(canary); string(b) != "canary" {
		t.Fatalf("canary changed: %q", b)
	}
}

func TestUploadTooLarge(t *testing.T) {
	const limit = 1 << 10
	e := newEnv(t, func(c *broker.Config) { c.MaxUploadBytes = limit })
	ws := e.workspace()
	writeHost(t, ws, "old.txt", "old content")
	over := strings.Repeat("n", limit+1)

	// Declared length over the limit: refused before reading.
	resp, data := e.do("PUT", wsPath(ws, "/files", "old.txt"), over)
	checkProblem(t, resp, data, http.StatusRequestEntityTooLarge, "too_large")
	// Chunked: cut off while streaming into the file.
	req := e.request("PUT", wsPath(ws, "/files", "old.txt"), io.MultiReader(strings.NewReader(over)))
	resp = e.send(req)
	data, _ = io.ReadAll(resp.Body)
	p := checkProblem(t, resp, data, http.StatusRequestEntityTooLarge, "too_large")
	if !strings.Contains(p.Detail, "larger than 1024 bytes") {
		t.Errorf("detail %q", p.Detail)
	}
	if got := readHost(t, ws, "old.txt"); got != "old content" {
		t.Fatalf("old file changed to %d bytes", len(got))
	}
	entries, _ := os.ReadDir(ws.Root)
	for _, en := range entries {
		if en.Name() != "old.txt" && !strings.HasPrefix(en.Name(), ".broker") {
			t.Errorf("leftover %s after a refused upload", en.Name())
		}
	}
	// Exactly the limit is fine.
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "old.txt"), strings.Repeat("k", limit), nil)
}

func TestStat(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	writeHost(t, ws, "a.txt", "hello")
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 20)...)
	writeHost(t, ws, "img.bin", string(png))
	if err := os.Mkdir(hostPath(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}

	var st wire.StatResponse
	e.must(200, "GET", wsPath(ws, "/stat", "a.txt"), nil, &st)
	if st.Name != "a.txt" || st.Type != opsapi.TypeFile || st.Size != 5 || st.Mode != 0o644 || st.ModTime.IsZero() || st.MIME != "" {
		t.Errorf("stat a.txt %+v", st)
	}
	st = wire.StatResponse{}
	e.must(200, "GET", wsPath(ws, "/stat", "img.bin"), nil, &st)
	if st.MIME != "image/png" {
		t.Errorf("stat img.bin mime %q", st.MIME)
	}
	st = wire.StatResponse{}
	e.must(200, "GET", wsPath(ws, "/stat", "d"), nil, &st)
	if st.Type != opsapi.TypeDir || st.MIME != "" {
		t.Errorf("stat d %+v", st)
	}
	e.must(200, "GET", wsPath(ws, "/stat", "a.txt")+"&access=rw", nil, &st)
	e.problem(http.StatusNotFound, "not_exist", "GET", wsPath(ws, "/stat", "nope")+"&access=r", nil)
	e.problem(http.StatusNotFound, "not_exist", "GET", wsPath(ws, "/stat", "nope"), nil)
	e.problem(http.StatusBadRequest, "invalid", "GET", wsPath(ws, "/stat", "a.txt")+"&access=x", nil)
	if os.Geteuid() != 0 { // root may write anything
		if err := os.Chmod(hostPath(ws, "a.txt"), 0o444); err != nil {
			t.Fatal(err)
		}
		e.problem(http.StatusForbidden, "permission", "GET", wsPath(ws, "/stat", "a.txt")+"&access=w", nil)
	}
}

func TestRealPath(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	writeHost(t, ws, "dir/target.txt", "t")
	if err := os.Symlink("dir/target.txt", hostPath(ws, "link")); err != nil {
		t.Fatal(err)
	}
	var rp wire.RealPathResponse
	e.must(200, "GET", wsPath(ws, "/realpath", "link"), nil, &rp)
	if rp.Path != ws.Root+"/dir/target.txt" {
		t.Errorf("realpath %q, want %s/dir/target.txt", rp.Path, ws.Root)
	}
	e.problem(http.StatusNotFound, "not_exist", "GET", wsPath(ws, "/realpath", "nope"), nil)
}

func TestDirs(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	e.must(http.StatusNoContent, "POST", wsPath(ws, "/dirs", "a/b/c"), nil, nil)
	e.must(http.StatusNoContent, "POST", wsPath(ws, "/dirs", "a/b/c"), nil, nil) // mkdir -p
	if fi, err := statHost(ws, "a/b/c"); err != nil || !fi.IsDir() {
		t.Fatalf("a/b/c: %v", err)
	}
	writeHost(t, ws, "z.txt", "zz")
	writeHost(t, ws, "m.txt", "m")
	e.problem(http.StatusConflict, "exists", "POST", wsPath(ws, "/dirs", "z.txt"), nil)

	var list wire.DirList
	e.must(200, "GET", wsPath(ws, "/dirs", "."), nil, &list)
	var names []string
	for _, en := range list.Entries {
		if en.Name != ".broker" {
			names = append(names, en.Name+":"+string(en.Type))
		}
	}
	if got := strings.Join(names, ","); got != "a:dir,m.txt:file,z.txt:file" {
		t.Errorf("entries %s", got)
	}
	e.must(200, "GET", wsPath(ws, "/dirs", "a/b/c"), nil, &list)
	if list.Entries == nil || len(list.Entries) != 0 {
		t.Errorf("empty dir %+v", list)
	}
	e.problem(http.StatusConflict, "not_dir", "GET", wsPath(ws, "/dirs", "z.txt"), nil)
	e.problem(http.StatusNotFound, "not_exist", "GET", wsPath(ws, "/dirs", "nope"), nil)
}

func TestGlob(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	for _, f := range []string{"a.go", "b/c.go", "d.txt", "ignored.go", "node_modules/m.go"} {
		writeHost(t, ws, f, "package x\n")
	}
	writeHost(t, ws, ".gitignore", "ignored.go\n")
	var res opsapi.GlobResult
	data := e.must(200, "POST", "/v1/workspaces/"+ws.ID+"/glob",
		map[string]any{"pattern": "*.go", "cwd": ".", "ignore": []string{"**/node_modules/**"}}, &res)
	sort.Strings(res.Paths)
	if got := strings.Join(res.Paths, ","); got != "a.go,b/c.go" {
		t.Errorf("glob %s (%s)", got, data)
	}
	e.must(200, "POST", "/v1/workspaces/"+ws.ID+"/glob", map[string]any{"pattern": "*.none", "cwd": "."}, &res)
	if res.Paths == nil || len(res.Paths) != 0 {
		t.Errorf("no match gives %+v", res)
	}
	e.problem(http.StatusNotFound, "not_exist", "POST", "/v1/workspaces/"+ws.ID+"/glob", map[string]any{"pattern": "*", "cwd": "nope"})
	e.problem(http.StatusBadRequest, "invalid", "POST", "/v1/workspaces/"+ws.ID+"/glob", map[string]any{"pattern": "*\x00", "cwd": "."})
	e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces/"+ws.ID+"/glob", map[string]any{"pattern": "*", "dir": "."})
	e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces/"+ws.ID+"/glob", map[string]any{"pattern": "*", "limit": "ten"})
}

func TestSearch(t *testing.T) {
	testutil.RequireCommand(t, "rg")
	e := newEnv(t, nil)
	ws := e.workspace()
	writeHost(t, ws, "a.txt", "one\nneedle here\nthree\n")
	writeHost(t, ws, "sub/b.txt", "no\nNEEDLE too\n")
	var res opsapi.SearchResult
	e.must(200, "POST", "/v1/workspaces/"+ws.ID+"/search",
		map[string]any{"pattern": "needle", "path": ".", "ignoreCase": true}, &res)
	var got []string
	for _, l := range res.Lines {
		if l.Match {
			got = append(got, l.Path+":"+l.Text)
		}
	}
	sort.Strings(got)
	if strings.Join(got, "|") != "a.txt:needle here|sub/b.txt:NEEDLE too" {
		t.Errorf("search %+v", res)
	}
	e.must(200, "POST", "/v1/workspaces/"+ws.ID+"/search", map[string]any{"pattern": "absent", "path": "."}, &res)
	if res.Lines == nil || len(res.Lines) != 0 {
		t.Errorf("no match gives %+v", res)
	}
	e.problem(http.StatusBadRequest, "invalid", "POST", "/v1/workspaces/"+ws.ID+"/search", map[string]any{"pattern": "(", "path": "."})
	e.problem(http.StatusBadRequest, "invalid", "POST", "/v1/workspaces/"+ws.ID+"/search", map[string]any{"pattern": "x", "path": ".", "context": -1})
	e.problem(http.StatusBadRequest, "invalid", "POST", "/v1/workspaces/"+ws.ID+"/search", map[string]any{"pattern": "x", "path": "a\x00"})
	e.problem(http.StatusNotFound, "not_exist", "POST", "/v1/workspaces/"+ws.ID+"/search", map[string]any{"pattern": "x", "path": "nope"})
}
