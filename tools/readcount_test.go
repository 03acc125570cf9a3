package tools

import (
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// meteredWorkspace serves one file of size bytes made by gen, and counts
// the bytes the tool pulls from it; onRead runs after each read.
type meteredWorkspace struct {
	*fakeWorkspace
	size   int64
	gen    func() io.Reader
	read   *atomic.Int64
	onRead func(total int64)
}

func (m meteredWorkspace) Access(context.Context, string, opsapi.AccessMode) error { return nil }
func (m meteredWorkspace) Open(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(&meter{r: io.LimitReader(m.gen(), m.size), m: m}), nil
}

type meter struct {
	r io.Reader
	m meteredWorkspace
}

func (r *meter) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	total := r.m.read.Add(int64(n))
	if r.m.onRead != nil {
		r.m.onRead(total)
	}
	return n, err
}

// zeros reads as a sparse file's hole does: NUL bytes, no newline.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func withCountBudget(t *testing.T, n int64) {
	old := countBudget
	countBudget = n
	t.Cleanup(func() { countBudget = old })
}

// TestReadStopsCountingPastItsBudget: past what it shows, a read counts
// lines in at most countBudget more bytes (not the whole 64 MiB here, nor
// 50 GB in real life) and says the total is a lower bound; a file within
// the budget keeps pi's exact notice.
func TestReadStopsCountingPastItsBudget(t *testing.T) {
	withCountBudget(t, 1<<20)
	var read atomic.Int64
	ws := meteredWorkspace{fakeWorkspace: newFakeWorkspace(t), size: 64 << 20, read: &read,
		gen: func() io.Reader { return &lineGen{} }}
	tb := newTestToolbox(t, ws)

	got := text(t, call(t, tb, "read", `{"path":"big.log"}`))
	if n := read.Load(); n > 2<<20 {
		t.Errorf("read pulled %d bytes of a 64 MiB file to count its lines", n)
	}
	// 1 MiB of 100-byte lines past what is shown, give or take a buffer.
	if m := regexp.MustCompile(`\n\n\[Showing lines 1-512 of at least (\d+) \(stopped counting after 1\.0MB more\)\. Use offset=513 to continue\.\]$`).
		FindStringSubmatch(got); m == nil || atoi(m[1]) < 10000 || atoi(m[1]) > 12000 {
		t.Errorf("notice: %q", got[max(0, len(got)-160):])
	}

	read.Store(0)
	got = text(t, call(t, tb, "read", `{"path":"big.log","offset":3,"limit":2}`))
	if n := read.Load(); n > 2<<20 {
		t.Errorf("read with a limit pulled %d bytes", n)
	}
	if m := regexp.MustCompile(`\n\n\[At least (\d+) more lines in file \(stopped counting after 1\.0MB more\)\. Use offset=5 to continue\.\]$`).
		FindStringSubmatch(got); m == nil || atoi(m[1]) < 10000 || atoi(m[1]) > 12000 {
		t.Errorf("limit notice: %q", got[max(0, len(got)-160):])
	}

	small := meteredWorkspace{fakeWorkspace: newFakeWorkspace(t), size: 512 << 10, read: &read,
		gen: func() io.Reader { return &lineGen{} }}
	got = text(t, call(t, newTestToolbox(t, small), "read", `{"path":"small.log"}`))
	if !strings.HasSuffix(got, "\n\n[Showing lines 1-512 of 5243 (50.0KB limit). Use offset=513 to continue.]") {
		t.Errorf("within the budget: %q", got[max(0, len(got)-160):])
	}
}

// TestReadOfAHoleIsBounded: a file of NULs with no newline (a sparse
// file's hole) is one giant first line: the read answers with pi's
// first-line notice after scanning at most the budget past what it keeps.
func TestReadOfAHoleIsBounded(t *testing.T) {
	withCountBudget(t, 1<<20)
	var read atomic.Int64
	ws := meteredWorkspace{fakeWorkspace: newFakeWorkspace(t), size: 1 << 40, read: &read,
		gen: func() io.Reader { return zeros{} }}
	got := text(t, call(t, newTestToolbox(t, ws), "read", `{"path":"sparse"}`))
	if n := read.Load(); n > 4<<20 {
		t.Errorf("read pulled %d bytes of a hole", n)
	}
	if !strings.HasPrefix(got, "[Line 1 is at least 1.1MB, exceeds 50.0KB limit.") {
		t.Errorf("text: %q", got)
	}
}

// TestReadCountingStopsWhenCanceled: the caller leaving (its context
// ending) stops the counting scan at once.
func TestReadCountingStopsWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var read atomic.Int64
	ws := meteredWorkspace{fakeWorkspace: newFakeWorkspace(t), size: 1 << 40, read: &read,
		gen: func() io.Reader { return &lineGen{} },
		onRead: func(total int64) {
			if total > 8<<20 {
				cancel()
			}
		}}
	r := newTestToolbox(t, ws).Call(ctx, "read", json.RawMessage(`{"path":"big.log"}`), nil)
	if !r.IsError || text(t, r) != "Operation aborted" {
		t.Fatalf("canceled read: %+v", r)
	}
	if n := read.Load(); n > 9<<20 {
		t.Errorf("the scan went on for %d bytes after the cancel", n-(8<<20))
	}
}
