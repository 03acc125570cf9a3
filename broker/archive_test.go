//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/wire"
)

// tarEntries builds a tar: name -> content, "->target" for a link, a
// trailing / for a directory.
func tarEntries(t *testing.T, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e[0], Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e[1]))}
		switch {
		case strings.HasSuffix(e[0], "/"):
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		case strings.HasPrefix(e[1], "->"):
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, e[1][2:], 0
		case strings.HasSuffix(e[0], ".sh"):
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := io.WriteString(tw, e[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	return buf.Bytes()
}

// TestArchiveInAndOut: a tar lands over HTTP with its modes and links,
// hostile entries are refused by name, the directory comes back out as a
// zstd tar with the report in a trailer, and limits and bad requests get
// problems.
func TestArchiveInAndOut(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) { c.MaxArchiveEntries = 20 })
	ws := e.workspace()
	body := tarEntries(t,
		[2]string{"src/", ""},
		[2]string{"src/run.sh", "#!/bin/sh\necho hi\n"},
		[2]string{"src/lib/a.txt", "alpha"},
		[2]string{"bin/run", "->../src/run.sh"},
		[2]string{"../escape", "x"},
		[2]string{"/abs", "x"},
		[2]string{"out", "->../../etc"},
	)
	var rep wire.ArchiveReport
	e.must(http.StatusOK, "PUT", wsPath(ws, "/archive", "seed"), body, &rep)
	if rep.Files != 2 || rep.Links != 1 || rep.Dirs != 1 || len(rep.Refused) != 3 {
		t.Fatalf("report %+v", rep)
	}
	refused := map[string]bool{}
	for _, r := range rep.Refused {
		refused[r.Name] = r.Reason != ""
	}
	if !refused["../escape"] || !refused["/abs"] || !refused["out"] {
		t.Errorf("refused %+v", rep.Refused)
	}
	if fi, err := os.Stat(hostPath(ws, "seed/src/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(hostPath(ws, "seed/bin/run")); string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("through the link: %q", b)
	}
	if _, err := os.Lstat(hostPath(ws, "../escape")); err == nil {
		t.Error("../escape landed beside the workspace")
	}

	resp := e.send(e.request("GET", wsPath(ws, "/archive", "seed")+"&compression=zstd", nil))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/zstd" {
		t.Fatalf("GET archive: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	zr, err := zstd.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name+map[byte]string{tar.TypeSymlink: "->" + hdr.Linkname}[hdr.Typeflag])
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil { // to the trailer
		t.Fatal(err)
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != "bin/ bin/run->../src/run.sh src/ src/lib/ src/lib/a.txt src/run.sh" {
		t.Errorf("archive holds %s", got)
	}
	var out wire.ArchiveReport
	if err := json.Unmarshal([]byte(resp.Trailer.Get(broker.ArchiveReportTrailer)), &out); err != nil || out.Files != 2 || out.Links != 1 {
		t.Errorf("trailer %q: %+v %v", resp.Trailer.Get(broker.ArchiveReportTrailer), out, err)
	}

	e.problem(http.StatusNotFound, "not_exist", "GET", wsPath(ws, "/archive", "missing"), nil)
	e.problem(http.StatusBadRequest, "invalid", "GET", wsPath(ws, "/archive", "seed")+"&compression=lz4", nil)
	e.problem(http.StatusBadRequest, "invalid", "PUT", wsPath(ws, "/archive", "bad"), "this is no tar")
	var many [][2]string
	for i := range 25 {
		many = append(many, [2]string{"f" + strings.Repeat("x", i), "y"})
	}
	e.problem(http.StatusRequestEntityTooLarge, "too_large", "PUT", wsPath(ws, "/archive", "many"), tarEntries(t, many...))
}
