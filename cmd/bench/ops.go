package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
)

// Row names of the operations and tools. op.* call pi's *Operations
// (opsapi), tool.* call whole tools with pi's semantics.
const (
	opRead4K   = "op.read-4k"
	opWrite4K  = "op.write-4k"
	opRead8M   = "op.read-8m"
	opStat     = "op.stat"
	opReadDir  = "op.readdir"
	opMkdir    = "op.mkdir"
	opRealPath = "op.realpath"
	opGlob     = "op.glob"
	opSearch   = "op.search"
	opExecTrue = "op.exec-true"
	// Issue 19's fixture rows: a search of 2,000 files with 200 hits,
	// a listing of 1,000 entries.
	opSearchWide  = "op.search-2k"
	opReadDirWide = "op.readdir-1k"
	toolRead      = "tool.read"
	toolWrite     = "tool.write"
	toolEdit      = "tool.edit"
	toolBashTrue  = "tool.bash-true"
	toolGrep      = "tool.grep"
	toolFind      = "tool.find"
	toolLs        = "tool.ls"
	streamBase64  = "stream.base64"
)

// latencyOps are the rows of the per-call latency scenario, in order.
var latencyOps = []string{
	opRead4K, opWrite4K, opRead8M, opStat, opReadDir, opMkdir, opRealPath, opGlob, opSearch, opSearchWide, opReadDirWide, opExecTrue,
	toolRead, toolWrite, toolEdit, toolBashTrue, toolGrep, toolFind, toolLs,
	archiveUp, archiveDown,
	opCreate, opCreateWarm, // docker and kubernetes only
}

// The seeded workspace: a 4 KiB file, a file to edit back and forth, and
// a small source tree for ls, find and grep.
const (
	file4K      = "fixture/4k.txt"
	fileEdit    = "fixture/edit.txt"
	treeDir     = "fixture/tree"
	treeDirs    = 5
	treeFiles   = 10 // per directory
	searchRegex = `func [A-Z]\w*\(`
	size4K      = 4096
	file8M      = "fixture/8m.bin"
	size8M      = 8 << 20
	// The wide tree: wideDirs directories of wideFiles files; one file
	// in wideHitEvery holds wideNeedle.
	wideDir      = "fixture/wide"
	wideDirs     = 2
	wideFiles    = 1000
	wideHitEvery = 10
	wideNeedle   = "needle"
)

// rowBytes are the bytes one call of a row moves; such a row also
// reports MB/s, as size over its p50.
func rowBytes(name string, cfg Config) int64 {
	switch name {
	case opRead8M:
		return size8M
	case archiveUp, archiveDown:
		return cfg.ArchiveBytes
	}
	return 0
}

// content4K is 64 lines of 64 bytes.
var content4K = func() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size4K; i++ {
		fmt.Fprintf(&b, "line %04d: the quick brown fox jumps over the lazy dog %05d\n", i, i)
	}
	return b.Bytes()[:size4K]
}()

// content8M is size8M bytes that do not compress to nothing.
func content8M() []byte {
	b := make([]byte, size8M)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// seed writes the fixture through the workspace's own operations, so an
// HTTP target is seeded over the wire like any client would.
func seed(ctx context.Context, ws opsapi.WriteOperations) error {
	files := map[string][]byte{
		file4K:   content4K,
		fileEdit: []byte("first line\nstate: alpha\nlast line\n"),
		file8M:   content8M(),
	}
	for d := range treeDirs {
		for f := range treeFiles {
			var b strings.Builder
			fmt.Fprintf(&b, "package pkg%d\n\n", d)
			for fn := range 8 {
				fmt.Fprintf(&b, "// Func%d_%d does nothing useful.\nfunc Func%d_%d(x int) int {\n\treturn x + %d\n}\n\n", f, fn, f, fn, fn)
			}
			files[fmt.Sprintf("%s/pkg%d/file%02d.go", treeDir, d, f)] = []byte(b.String())
		}
	}
	for _, dir := range []string{"fixture", "clients"} {
		if err := ws.Mkdir(ctx, dir); err != nil {
			return fmt.Errorf("seeding %s: %w", dir, err)
		}
	}
	for d := range treeDirs {
		dir := fmt.Sprintf("%s/pkg%d", treeDir, d)
		if err := ws.Mkdir(ctx, dir); err != nil {
			return fmt.Errorf("seeding %s: %w", dir, err)
		}
	}
	for p, b := range files {
		if err := ws.WriteFile(ctx, p, bytes.NewReader(b)); err != nil {
			return fmt.Errorf("seeding %s: %w", p, err)
		}
	}
	return nil
}

// wideTree seeds the wide tree at the first call of a row that needs it,
// a warm-up call: only those latency rows use it, and its 2,000 writes in
// every target's seeding made every scenario seconds slower.
type wideTree struct {
	once sync.Once
	err  error
}

func (w *wideTree) ensure(ctx context.Context, ws opsapi.WriteOperations) error {
	w.once.Do(func() { w.err = seedWide(ctx, ws) })
	return w.err
}

// seedWide writes the wide tree, eight files at a time: 2,000 writes one
// after another would add seconds to every target's seeding.
func seedWide(ctx context.Context, ws opsapi.WriteOperations) error {
	if err := ws.Mkdir(ctx, wideDir); err != nil {
		return fmt.Errorf("seeding %s: %w", wideDir, err)
	}
	for d := range wideDirs {
		if err := ws.Mkdir(ctx, fmt.Sprintf("%s/d%d", wideDir, d)); err != nil {
			return fmt.Errorf("seeding %s: %w", wideDir, err)
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for d := range wideDirs {
		for f := range wideFiles {
			word := "hay"
			if f%wideHitEvery == 0 {
				word = wideNeedle
			}
			p := fmt.Sprintf("%s/d%d/f%04d.txt", wideDir, d, f)
			g.Go(func() error {
				if err := ws.WriteFile(ctx, p, strings.NewReader(fmt.Sprintf("%s %d %d\n", word, d, f))); err != nil {
					return fmt.Errorf("seeding %s: %w", p, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// wideHits is how many lines match wideNeedle in the wide tree.
const wideHits = wideDirs * wideFiles / wideHitEvery

// toolFunc calls one tool; the in-process Toolbox and the HTTP client
// both fit it.
type toolFunc func(ctx context.Context, name string, args json.RawMessage, onUpdate tools.UpdateFunc) (tools.Result, error)

// workspaceClient builds every op over a workspace and a tool caller.
// Client i writes to its own files, so concurrent clients do not queue
// behind one another on one path.
func workspaceClient(ws opsapi.Operations, call toolFunc, cfg Config, i int) Client {
	c := operationOps(ws, i)
	maps.Copy(c, toolOps(call, cfg, i))
	maps.Copy(c, archiveOps(ws, cfg, i))
	if r, ok := ws.(opsapi.Resolver); ok {
		c[opRealPath] = func(ctx context.Context) error {
			_, err := r.RealPath(ctx, file4K)
			return err
		}
	}
	return c
}

// operationOps are the op.* rows: one opsapi call each, its answer
// checked against the fixture.
func operationOps(ws opsapi.Operations, i int) Client {
	own := fmt.Sprintf("clients/c%03d.txt", i)
	wide := &wideTree{}
	return Client{
		opRead4K: func(ctx context.Context) error { return readWhole(ctx, ws, file4K, size4K) },
		opRead8M: func(ctx context.Context) error { return readWhole(ctx, ws, file8M, size8M) },
		opWrite4K: func(ctx context.Context) error {
			return ws.WriteFile(ctx, own, bytes.NewReader(content4K))
		},
		opStat: func(ctx context.Context) error {
			fi, err := ws.Stat(ctx, file4K)
			if err == nil && fi.Size != size4K {
				err = fmt.Errorf("stat %s: size %d, want %d", file4K, fi.Size, size4K)
			}
			return err
		},
		opReadDir: func(ctx context.Context) error {
			ents, err := ws.ReadDir(ctx, treeDir+"/pkg0")
			if err == nil && len(ents) != treeFiles {
				err = fmt.Errorf("readdir: %d entries, want %d", len(ents), treeFiles)
			}
			return err
		},
		opMkdir: func(ctx context.Context) error { return ws.Mkdir(ctx, "clients") },
		opGlob: func(ctx context.Context) error {
			res, err := ws.Glob(ctx, opsapi.GlobRequest{Pattern: "**/*.go", Dir: treeDir})
			if err == nil && len(res.Paths) != treeDirs*treeFiles {
				err = fmt.Errorf("glob: %d paths, want %d", len(res.Paths), treeDirs*treeFiles)
			}
			return err
		},
		opSearch: func(ctx context.Context) error {
			res, err := ws.Search(ctx, opsapi.SearchRequest{Pattern: searchRegex, Path: treeDir + "/pkg1", Limit: 100})
			if err == nil && len(res.Lines) == 0 {
				err = errors.New("search: no match")
			}
			return err
		},
		opSearchWide: func(ctx context.Context) error {
			if err := wide.ensure(ctx, ws); err != nil {
				return err
			}
			res, err := ws.Search(ctx, opsapi.SearchRequest{Pattern: wideNeedle, Path: wideDir, Literal: true, Limit: 1000})
			if err == nil && len(res.Lines) != wideHits {
				err = fmt.Errorf("search: %d lines, want %d", len(res.Lines), wideHits)
			}
			return err
		},
		opReadDirWide: func(ctx context.Context) error {
			if err := wide.ensure(ctx, ws); err != nil {
				return err
			}
			ents, err := ws.ReadDir(ctx, wideDir+"/d0")
			if err == nil && len(ents) != wideFiles {
				err = fmt.Errorf("readdir: %d entries, want %d", len(ents), wideFiles)
			}
			return err
		},
		opExecTrue: func(ctx context.Context) error {
			res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "true"})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exec true: exit code %d", res.ExitCode)
			}
			return err
		},
	}
}

// readWhole reads name to the end and checks it has size bytes.
func readWhole(ctx context.Context, ws opsapi.Operations, name string, size int64) error {
	rc, err := ws.Open(ctx, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	if err == nil && n != size {
		err = fmt.Errorf("read %d bytes of %s, want %d", n, name, size)
	}
	return err
}

// toolOps are the tool.* and stream rows: whole tool calls through call.
func toolOps(call toolFunc, cfg Config, i int) Client {
	ownTool := fmt.Sprintf("clients/t%03d.txt", i)
	writeArgs := mustJSON(map[string]string{"path": ownTool, "content": string(content4K)})
	var edits atomic.Int64
	tool := func(name string, args json.RawMessage) Op {
		return func(ctx context.Context) error {
			_, err := callTool(ctx, call, name, args, nil)
			return err
		}
	}
	return Client{
		toolRead:     tool("read", mustJSON(map[string]string{"path": file4K})),
		toolWrite:    tool("write", writeArgs),
		toolBashTrue: tool("bash", mustJSON(map[string]string{"command": "true"})),
		toolGrep:     tool("grep", mustJSON(map[string]string{"pattern": searchRegex, "path": treeDir + "/pkg1"})),
		toolFind:     tool("find", mustJSON(map[string]string{"pattern": "*.go", "path": treeDir})),
		toolLs:       tool("ls", mustJSON(map[string]string{"path": treeDir + "/pkg0"})),
		toolEdit: func(ctx context.Context) error {
			// Flip the marker back and forth; a shared counter keeps
			// clients of one in-process workspace in step.
			from, to := "alpha", "omega"
			if edits.Add(1)%2 == 0 {
				from, to = to, from
			}
			args := mustJSON(map[string]any{"path": fileEdit, "edits": []map[string]string{
				{"oldText": "state: " + from, "newText": "state: " + to},
			}})
			_, err := callTool(ctx, call, "edit", args, nil)
			return err
		},
		streamBase64: func(ctx context.Context) error {
			return base64Stream(ctx, call, cfg.StreamBytes)
		},
	}
}

// callTool calls a tool and turns an isError result into an error.
func callTool(ctx context.Context, call toolFunc, name string, args json.RawMessage, onUpdate tools.UpdateFunc) (tools.Result, error) {
	res, err := call(ctx, name, args, onUpdate)
	if err != nil {
		return res, err
	}
	if res.IsError {
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].Text
		}
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		return res, fmt.Errorf("tool %s: isError: %s", name, text)
	}
	return res, nil
}

// base64Stream runs `head -c n /dev/zero | base64` through the bash tool
// with streaming updates, as pi does, and checks that the whole output
// was produced (the tool keeps only its tail, but counts every byte).
func base64Stream(ctx context.Context, call toolFunc, n int64) error {
	args := mustJSON(map[string]string{"command": fmt.Sprintf("head -c %d /dev/zero | base64", n)})
	// A non-nil onUpdate asks for the streamed form (NDJSON over HTTP).
	res, err := callTool(ctx, call, "bash", args, func(tools.Result) {})
	if err != nil {
		return err
	}
	want := base64Len(n)
	var d struct {
		Truncation *struct {
			TotalBytes int64 `json:"totalBytes"`
		} `json:"truncation"`
	}
	if b, err := json.Marshal(res.Details); err == nil {
		_ = json.Unmarshal(b, &d) // absent details leave d empty
	}
	got := int64(0)
	switch {
	case d.Truncation != nil:
		got = d.Truncation.TotalBytes
	case len(res.Content) > 0:
		got = int64(len(res.Content[0].Text))
	}
	// pi drops the final newline of an untruncated output.
	if got != want && got != want-1 {
		return fmt.Errorf("base64 of %d bytes: tool counted %d output bytes, want %d", n, got, want)
	}
	return nil
}

// base64Len is the size of GNU base64's output for n input bytes: 4 per
// 3, wrapped at 76 columns, each line ending in a newline.
func base64Len(n int64) int64 {
	if n == 0 {
		return 0
	}
	enc := (n + 2) / 3 * 4
	return enc + (enc+75)/76
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed, well-formed values are marshalled
	}
	return b
}
