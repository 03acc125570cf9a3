package backendtest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"io"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
)

// heapBound is how much the test process's heap may grow while 100 MB or
// 1 GiB stream through it: far below the data size, well above noise.
const heapBound = 40 << 20

// heavy holds the cases that move a lot of data. They run one at a time
// (no t.Parallel) and after every other group, so the heap they measure is
// their own.
func (s *suite) heavy(t *testing.T) {
	s.heavyStreams(t)
	s.heavyTools(t)
}

// heavyStreams streams a lot of data through the operations.
func (s *suite) heavyStreams(t *testing.T) {
	t.Run("WriteFile_and_Open_stream_100MB_with_bounded_memory", func(t *testing.T) {
		ws := s.serial(t)
		const size = 100 << 20
		probe := newHeapProbe()
		gen := &genReader{n: size, h: sha256.New(), probe: probe}
		must(t, ws.WriteFile(ctxOf(t), "big.bin", gen))
		fi, err := ws.Stat(ctxOf(t), "big.bin")
		must(t, err)
		eq(t, "size", fi.Size, size)
		rc, err := ws.Open(ctxOf(t), "big.bin")
		must(t, err)
		h := sha256.New()
		n, err := io.CopyBuffer(&probingWriter{w: h, probe: probe}, rc, make([]byte, 64<<10))
		rc.Close()
		must(t, err)
		eq(t, "bytes read back", n, size)
		eq(t, "sha256", string(h.Sum(nil)), string(gen.h.Sum(nil)))
		if g := probe.growth(); g > heapBound {
			t.Errorf("heap grew by %d MB while streaming 100 MB, want < %d MB", g>>20, heapBound>>20)
		}
	})
	t.Run("Exec_streams_1GiB_of_output_with_bounded_memory", func(t *testing.T) {
		ws := s.serial(t)
		probe := newHeapProbe()
		w := &probingWriter{w: io.Discard, probe: probe}
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "head -c 1G /dev/zero", Output: w, Timeout: 5 * time.Minute})
		must(t, err)
		eq(t, "exit code", res.ExitCode, 0)
		eq(t, "bytes counted", w.n, 1<<30)
		if g := probe.growth(); g > heapBound {
			t.Errorf("heap grew by %d MB while streaming 1 GiB, want < %d MB", g>>20, heapBound>>20)
		}
	})
	t.Run("Exec_stalled_Output_writer_gets_backpressure_not_buffering", func(t *testing.T) {
		// The writer stalls for 2 s while the command could print 256 MB:
		// the backend must hold the command back, not buffer its output.
		ws := s.serial(t)
		probe := newHeapProbe()
		w := &stallingWriter{stall: 2 * time.Second, probe: probe}
		res, err := ws.Exec(ctxOf(t), opsapi.ExecRequest{Command: "head -c 256M /dev/zero", Output: w, Timeout: 5 * time.Minute})
		must(t, err)
		eq(t, "exit code", res.ExitCode, 0)
		eq(t, "bytes", w.n, 256<<20)
		if g := probe.growth(); g > heapBound {
			t.Errorf("heap grew by %d MB behind a stalled writer, want < %d MB", g>>20, heapBound>>20)
		}
	})
}

// heavyTools streams a lot through the tools, and leaves zombies behind.
func (s *suite) heavyTools(t *testing.T) {
	t.Run("tools_bash_100MB_single_line_keeps_the_tail_with_bounded_memory", func(t *testing.T) {
		ws := s.serial(t)
		// Room for the whole line: the default bound per workspace
		// (tools.DefaultMaxSpillBytes) would cut the saved copy at 32 MiB.
		tb := tools.New(ws, tools.Options{MaxSpillBytes: 128 << 20})
		t.Cleanup(func() { _ = tb.Close() })
		probe := newHeapProbe()
		r := tb.Call(ctxOf(t), "bash", json.RawMessage(`{"command":"head -c 104857600 /dev/zero | tr '\\0' a"}`),
			func(tools.Result) { probe.sample() })
		if g := probe.growth(); g > heapBound {
			t.Errorf("heap grew by %d MB for a 100 MB line, want < %d MB", g>>20, heapBound>>20)
		}
		eq(t, "error", r.IsError, false)
		got := textOf(r)
		m := regexp.MustCompile(`^(a*)\n\n\[Showing last 50\.0KB of line 1 \(line is 100\.0MB\)\. Full output: (.+)\]$`).FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("text = %q...%q", got[:min(40, len(got))], got[max(0, len(got)-120):])
		}
		eq(t, "tail bytes", len(m[1]), 51200)
		// The whole line was saved (out of the workspace): read sizes it.
		contains(t, "read of the full output", ok(t, tb, "read", js(map[string]any{"path": m[2]})), "[Line 1 is 100.0MB, exceeds 50.0KB limit.")
	})
	t.Run("tools_read_of_a_100MB_file_shows_2000_lines_with_bounded_memory", func(t *testing.T) {
		ws := s.serial(t)
		sh(t, ws, "{ yes line | head -n 19999999; printf line; } > big.txt")
		tb := tools.New(ws, tools.Options{})
		t.Cleanup(func() { _ = tb.Close() })
		probe := newHeapProbe()
		got := ok(t, tb, "read", `{"path":"big.txt"}`)
		if g := probe.growth(); g > heapBound {
			t.Errorf("heap grew by %d MB reading a 100 MB file, want < %d MB", g>>20, heapBound>>20)
		}
		eq(t, "text", got, strings.Repeat("line\n", 2000)+"\n[Showing lines 1-2000 of 20000000. Use offset=2001 to continue.]")
	})
	t.Run("Exec_1000_zombies_then_the_next_command_still_forks", func(t *testing.T) {
		ws := s.serial(t)
		// A parent that never reaps: sh forks 1000 children, then execs
		// sleep, which does not wait for them.
		sh(t, ws, `sh -c 'i=0; while [ $i -lt 1000 ]; do true & i=$((i+1)); done; echo ready > zombies.ready; exec sleep 3' </dev/null >/dev/null 2>&1 &`)
		if !eventually(60*time.Second, func() bool { _, err := ws.Stat(ctxOf(t), "zombies.ready"); return err == nil }) {
			t.Fatal("the zombie factory never finished")
		}
		out := sh(t, ws, "for i in 1 2 3 4 5; do (echo forked) & done; wait")
		eq(t, "output", out, "forked\nforked\nforked\nforked\nforked\n")
		time.Sleep(3 * time.Second) // the factory's sleep ends; its zombies are reaped by whoever adopts them
		eq(t, "after", sh(t, ws, "echo still forks"), "still forks\n")
	})
}

type heapProbe struct{ base, peak uint64 }

func newHeapProbe() *heapProbe {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &heapProbe{base: m.HeapInuse, peak: m.HeapInuse}
}

func (p *heapProbe) sample() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	p.peak = max(p.peak, m.HeapInuse)
}

func (p *heapProbe) growth() uint64 {
	p.sample()
	return p.peak - p.base
}

// genReader yields n deterministic pseudo-random bytes, hashing them and
// sampling the heap every 8 MB.
type genReader struct {
	n, off int64
	state  uint64
	h      hash.Hash
	probe  *heapProbe
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.off >= g.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), g.n-g.off) &^ 7
	if k == 0 {
		k = min(int64(len(p)), g.n-g.off)
	}
	var word [8]byte
	for i := int64(0); i < k; i += 8 {
		g.state = g.state*6364136223846793005 + 1442695040888963407
		binary.LittleEndian.PutUint64(word[:], g.state)
		copy(p[i:k], word[:])
	}
	g.h.Write(p[:k])
	if (g.off+k)>>23 != g.off>>23 {
		g.probe.sample()
	}
	g.off += k
	return int(k), nil
}

// probingWriter counts bytes and samples the heap every 16 MB.
type probingWriter struct {
	w     io.Writer
	n     int64
	probe *heapProbe
}

func (w *probingWriter) Write(p []byte) (int, error) {
	if (w.n+int64(len(p)))>>24 != w.n>>24 {
		w.probe.sample()
	}
	w.n += int64(len(p))
	return w.w.Write(p)
}

// stallingWriter blocks its first write for stall, then samples the heap
// (what piled up meanwhile) and counts bytes.
type stallingWriter struct {
	stall time.Duration
	n     int64
	probe *heapProbe
}

func (w *stallingWriter) Write(p []byte) (int, error) {
	if w.n == 0 && w.stall > 0 {
		time.Sleep(w.stall)
		w.probe.sample()
		w.stall = 0
	}
	if (w.n+int64(len(p)))>>24 != w.n>>24 {
		w.probe.sample()
	}
	w.n += int64(len(p))
	return len(p), nil
}
