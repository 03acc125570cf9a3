package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"
)

// Goal is one of the targets, checked against one row.
type Goal struct {
	Row     string
	Backend string
	Via     string
	Metric  string // shown, e.g. "p50"
	Unit    string
	AtMost  bool // value <= Limit; otherwise value >= Limit
	Limit   float64
	Value   func(Row) float64
	// Cond says how the run differs from the target's conditions ("" when
	// it does not), so a quick run's verdict is read as indicative.
	Cond func(Config) string
	// RefVia, when set, makes the goal relative: Rel compares the row
	// with the row RefRow (default Row) of the same backend reached via
	// RefVia, measured in the same run.
	RefVia string
	RefRow string
	Rel    func(r, ref Row) float64
	// Note is printed beside the verdict, e.g. when the goal is checked
	// on another path than the issue's.
	Note string
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// p50 is a row's median in milliseconds.
func p50(r Row) float64 { return ms(r.P50) }

// loadCond says how a run of the mixed load differs from the targets'
// (30 s, 256 clients).
func loadCond(c Config) string {
	var diffs []string
	if c.Duration < 30*time.Second {
		diffs = append(diffs, fmt.Sprintf("ran %s, target says 30s", c.Duration))
	}
	if c.Clients != 256 {
		diffs = append(diffs, fmt.Sprintf("%d clients, target says 256", c.Clients))
	}
	return strings.Join(diffs, "; ")
}

// goals are the targets, on the local backend through HTTP.
func goals() []Goal {
	streamCond := func(c Config) string {
		if c.StreamBytes != 1<<30 {
			return fmt.Sprintf("streamed %s, target says 1 GiB", formatBytes(c.StreamBytes))
		}
		return ""
	}
	return append([]Goal{
		{Row: opRead4K, Backend: "local", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 0.5, Value: p50},
		{Row: opExecTrue, Backend: "local", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 5, Value: p50},
		{Row: toolBashTrue, Backend: "local", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 5, Value: p50},
		{Row: loadMixed, Backend: "local", Via: ViaHTTP, Metric: "errors", Unit: "", AtMost: true, Limit: 0,
			Value: func(r Row) float64 { return float64(r.Errors) }, Cond: loadCond},
		{Row: loadMixed, Backend: "local", Via: ViaHTTP, Metric: "p99", Unit: "ms", AtMost: true, Limit: 50,
			Value: func(r Row) float64 { return ms(r.P99) }, Cond: loadCond},
		{Row: loadMixed, Backend: "local", Via: ViaHTTP, Metric: "broker peak RSS", Unit: "MiB", AtMost: true, Limit: 150,
			Value: func(r Row) float64 { return mib(r.PeakRSS) }, Cond: loadCond},
		{Row: streamBase64, Backend: "local", Via: ViaHTTP, Metric: "broker peak RSS", Unit: "MiB", AtMost: true, Limit: 64,
			Value: func(r Row) float64 { return mib(r.PeakRSS) }, Cond: streamCond},
		{Row: streamBase64, Backend: "local", Via: ViaHTTP, Metric: "output rate", Unit: "MB/s", AtMost: false, Limit: 150,
			Value: func(r Row) float64 { return r.MBps }, Cond: streamCond},

		// Issue 18 (MCP): a tool call through /v1/workspaces/{id}/mcp
		// against the HTTP tool route, same run, same turns.
		{Row: toolRead, Backend: "local", Via: ViaMCP, Metric: "p50 / http p50", Unit: "x", AtMost: true, Limit: 1.5,
			RefVia: ViaHTTP, Rel: p50Ratio},
		{Row: toolBashTrue, Backend: "local", Via: ViaMCP, Metric: "p50 / http p50", Unit: "x", AtMost: true, Limit: 1.5,
			RefVia: ViaHTTP, Rel: p50Ratio},

		// Issue 16 (the local sandbox): a sandboxed command against the
		// unsandboxed local backend, both through the broker, same run.
		{Row: opExecTrue, Backend: "local", Via: ViaSandboxHTTP, Metric: "p50 / unsandboxed http p50", Unit: "x", AtMost: true, Limit: 1.5,
			RefVia: ViaHTTP, Rel: p50Ratio},
		{Row: toolBashTrue, Backend: "local", Via: ViaSandboxHTTP, Metric: "p50 / unsandboxed http p50", Unit: "x", AtMost: true, Limit: 1.5,
			RefVia: ViaHTTP, Rel: p50Ratio},

		// Issue 5 (ssh): the read through the broker; exec against the raw
		// session both in-process and through the broker.
		{Row: opRead4K, Backend: "ssh", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 2, Value: p50},
		{Row: opExecTrue, Backend: "ssh", Via: ViaHTTP, Metric: "p50 / raw session p50", Unit: "x", AtMost: true, Limit: 1.3,
			RefVia: ViaRaw, Rel: p50Ratio},
		{Row: toolBashTrue, Backend: "ssh", Via: ViaHTTP, Metric: "p50 / raw session p50", Unit: "x", AtMost: true, Limit: 1.3,
			RefVia: ViaRaw, Rel: p50Ratio},
		{Row: opExecTrue, Backend: "ssh", Via: ViaInProcess, Metric: "p50 / raw session p50", Unit: "x", AtMost: true, Limit: 1.3,
			RefVia: ViaRaw, Rel: p50Ratio},
		{Row: toolBashTrue, Backend: "ssh", Via: ViaInProcess, Metric: "p50 / raw session p50", Unit: "x", AtMost: true, Limit: 1.3,
			RefVia: ViaRaw, Rel: p50Ratio},

		// Issue 4 (docker): through the broker, raw exec rows of the same run.
		{Row: opRead4K, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 2, Value: p50},
		{Row: opWrite4K, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 2, Value: p50},
		{Row: opRead4K, Backend: "docker", Via: ViaHTTP, Metric: "raw exec p50 / p50", Unit: "x", AtMost: false, Limit: 25,
			RefVia: ViaRaw, Rel: func(r, ref Row) float64 { return p50Ratio(ref, r) }, Note: "raw is one exec of cat per read"},
		{Row: opWrite4K, Backend: "docker", Via: ViaHTTP, Metric: "raw exec p50 / p50", Unit: "x", AtMost: false, Limit: 25,
			RefVia: ViaRaw, RefRow: opRead4K, Rel: func(r, ref Row) float64 { return p50Ratio(ref, r) },
			Note: "raw is one exec of cat per read"},
		{Row: opRead8M, Backend: "docker", Via: ViaHTTP, Metric: "8 MiB / p50", Unit: "MB/s", AtMost: false, Limit: 100,
			Value: func(r Row) float64 { return r.MBps }},
		{Row: opExecTrue, Backend: "docker", Via: ViaHTTP, Metric: "p50 / raw exec p50", Unit: "x", AtMost: true, Limit: 1.3,
			RefVia: ViaRaw, Rel: p50Ratio},
		{Row: toolBashTrue, Backend: "docker", Via: ViaHTTP, Metric: "p50 / raw exec p50", Unit: "x", AtMost: true, Limit: 1.3,
			RefVia: ViaRaw, Rel: p50Ratio},
		{Row: opCreate, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 1500, Value: p50},
		// ... and in-process, to show what HTTP adds.
		{Row: opRead4K, Backend: "docker", Via: ViaInProcess, Metric: "p50", Unit: "ms", AtMost: true, Limit: 2, Value: p50,
			Note: "in-process; the issue says through the broker"},
		{Row: opWrite4K, Backend: "docker", Via: ViaInProcess, Metric: "p50", Unit: "ms", AtMost: true, Limit: 2, Value: p50,
			Note: "in-process; the issue says through the broker"},
		{Row: opExecTrue, Backend: "docker", Via: ViaInProcess, Metric: "p50 / raw exec p50", Unit: "x", AtMost: true, Limit: 1.3,
			RefVia: ViaRaw, Rel: p50Ratio},
		{Row: opCreate, Backend: "docker", Via: ViaInProcess, Metric: "p50", Unit: "ms", AtMost: true, Limit: 1500, Value: p50},
	}, append(agentGoals(), hostileGoals()...)...)
}

// agentGoals are issue 19's targets (the in-box agent): the docker and
// ssh rows through the broker.
func agentGoals() []Goal {
	return []Goal{
		{Row: opExecTrue, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 5, Value: p50,
			Note: "issue 19"},
		{Row: opExecTrue, Backend: "docker", Via: ViaHTTP, Metric: "raw exec p50 / p50", Unit: "x", AtMost: false, Limit: 10,
			RefVia: ViaRaw, Rel: func(r, ref Row) float64 { return p50Ratio(ref, r) }, Note: "issue 19"},
		{Row: opRead8M, Backend: "docker", Via: ViaHTTP, Metric: "8 MiB / p50", Unit: "MB/s", AtMost: false, Limit: 500,
			Value: func(r Row) float64 { return r.MBps }, Note: "issue 19"},
		{Row: opRead4K, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 0.8, Value: p50,
			Note: "issue 19"},
		{Row: opWrite4K, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 0.8, Value: p50,
			Note: "issue 19"},
		{Row: opExecTrue, Backend: "ssh", Via: ViaHTTP, Metric: "p50 / raw session p50", Unit: "x", AtMost: true, Limit: 1,
			RefVia: ViaRaw, Rel: p50Ratio, Note: "issue 19: below one raw session"},
		{Row: opSearchWide, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 30, Value: p50,
			Note: "issue 19: 2,000 files, 200 hits"},
		{Row: opReadDirWide, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 10, Value: p50,
			Note: "issue 19: 1,000 entries"},
		{Row: loadMixed, Backend: "docker", Via: ViaHTTP, Metric: "errors", Unit: "", AtMost: true, Limit: 0,
			Value: func(r Row) float64 { return float64(r.Errors) }, Cond: loadCond, Note: "issue 19"},
		{Row: loadMixed, Backend: "docker", Via: ViaHTTP, Metric: "p99", Unit: "ms", AtMost: true, Limit: 100,
			Value: func(r Row) float64 { return ms(r.P99) }, Cond: loadCond, Note: "issue 19"},
		{Row: loadMixed, Backend: "docker", Via: ViaHTTP, Metric: "calls", Unit: "/s", AtMost: false, Limit: 240,
			Value: func(r Row) float64 { return r.Throughput }, Cond: loadCond, Note: "issue 19"},
		{Row: opCreate, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 350, Value: p50,
			Note: "issue 19: cold"},
		{Row: opCreateWarm, Backend: "docker", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 50, Value: p50,
			Note: "issue 19: from the warm pool"},
		{Row: opCreate, Backend: "kubernetes", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 2000, Value: p50,
			Note: "issue 21: cold, to the agent answering"},
		{Row: opCreateWarm, Backend: "kubernetes", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 100, Value: p50,
			Note: "issue 21: from the warm pool"},
		{Row: opExecTrue, Backend: "kubernetes", Via: ViaHTTP, Metric: "p50", Unit: "ms", AtMost: true, Limit: 10, Value: p50,
			Note: "issue 21"},
		{Row: archiveUp, Backend: "docker", Via: ViaHTTP, Metric: "tar / p50", Unit: "MB/s", AtMost: false, Limit: 300,
			Value: func(r Row) float64 { return r.MBps }, Cond: archiveCond, Note: "issue 20"},
		{Row: archiveDown, Backend: "docker", Via: ViaHTTP, Metric: "tar / p50", Unit: "MB/s", AtMost: false, Limit: 300,
			Value: func(r Row) float64 { return r.MBps }, Cond: archiveCond, Note: "issue 20"},
	}
}

// archiveCond says when the archive rows ran smaller than issue 20's
// 100 MiB.
func archiveCond(c Config) string {
	if c.ArchiveBytes != 100<<20 {
		return fmt.Sprintf("%d MiB tar, target says 100", c.ArchiveBytes>>20)
	}
	return ""
}

// hostileGoals are issue 14's targets: while the hostile load runs, the
// broker stays small and answers /healthz quickly, and nothing is lost.
func hostileGoals() []Goal {
	cond := func(c Config) string {
		if c.HostileClients != 200 {
			return fmt.Sprintf("%d uploads and execs, target says 200", c.HostileClients)
		}
		return ""
	}
	none := func(row, metric string) Goal {
		return Goal{Row: row, Backend: "local", Via: ViaHTTP, Metric: metric, AtMost: true, Limit: 0,
			Value: func(r Row) float64 { return float64(r.Errors) }, Cond: cond}
	}
	return []Goal{
		{Row: hostileHealthz, Backend: "local", Via: ViaHTTP, Metric: "p99", Unit: "ms", AtMost: true, Limit: 50,
			Value: func(r Row) float64 { return ms(r.P99) }, Cond: cond},
		{Row: hostileHealthz, Backend: "local", Via: ViaHTTP, Metric: "broker peak RSS", Unit: "MiB", AtMost: true, Limit: 256,
			Value: func(r Row) float64 { return mib(r.PeakRSS) }, Cond: cond},
		none(hostileHealthz, "failed probes"),
		none(hostileUploads, "lost uploads"),
		none(hostileExecs, "lost execs"),
		none(hostileDownloads, "lost downloads"),
		none(hostileUnauth, "answers not 401 or 429"),
	}
}

// p50Ratio is r's median over ref's.
func p50Ratio(r, ref Row) float64 { return div(float64(r.P50), float64(ref.P50)) }

// findRef returns the row g is relative to, for r.
func (rep *Report) findRef(g Goal, r Row) (Row, bool) {
	name := g.RefRow
	if name == "" {
		name = g.Row
	}
	for _, ref := range rep.Rows {
		if ref.Name == name && ref.Backend == r.Backend && ref.Via == g.RefVia {
			return ref, true
		}
	}
	return Row{}, false
}

// Verdict is a Goal checked against a run.
type Verdict struct {
	Row    string  `json:"row"`
	Target string  `json:"target"`
	Goal   string  `json:"goal"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit,omitempty"`
	Pass   bool    `json:"pass"`
	Note   string  `json:"note,omitempty"`
}

// verdicts checks every goal whose row was measured.
func (rep *Report) verdicts() []Verdict {
	var out []Verdict
	for _, g := range goals() {
		for _, r := range rep.Rows {
			if r.Name != g.Row || r.Backend != g.Backend || r.Via != g.Via {
				continue
			}
			var v float64
			if g.RefVia != "" {
				ref, ok := rep.findRef(g, r)
				if !ok {
					continue
				}
				v = g.Rel(r, ref)
			} else {
				v = g.Value(r)
			}
			op, pass := ">=", v >= g.Limit
			switch {
			case g.AtMost && g.Limit == 0:
				op, pass = "=", v == 0
			case g.AtMost:
				op, pass = "<=", v <= g.Limit
			}
			vd := Verdict{Row: r.Name, Target: r.Target, Value: v, Unit: g.Unit, Pass: pass,
				Goal: strings.TrimSpace(fmt.Sprintf("%s %s %g %s", g.Metric, op, g.Limit, g.Unit))}
			if g.Cond != nil {
				vd.Note = g.Cond(rep.Config)
			}
			if g.Note != "" {
				vd.Note = strings.TrimPrefix(vd.Note+"; "+g.Note, "; ")
			}
			out = append(out, vd)
		}
	}
	return out
}

// allPass reports whether every checked target was met.
func (rep *Report) allPass() bool {
	for _, v := range rep.verdicts() {
		if !v.Pass {
			return false
		}
	}
	return true
}

// Ratio compares the rows of one name and backend reached two ways.
type Ratio struct {
	Row        string  `json:"row"`
	Backend    string  `json:"backend"`
	Of         string  `json:"of"` // e.g. "http/in-process"
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
	Throughput float64 `json:"throughput"`
}

// ratioPairs are the comparisons printed: what HTTP adds to the
// backend, what the backend adds to the raw calls, and what MCP costs
// beside the HTTP tool route, and what the local sandbox adds.
var ratioPairs = [][2]string{{ViaHTTP, ViaInProcess}, {ViaInProcess, ViaRaw}, {ViaMCP, ViaHTTP}, {ViaSandboxHTTP, ViaHTTP}}

// ratios pairs rows of the same name and backend, numerator first.
func (rep *Report) ratios() []Ratio {
	var out []Ratio
	for _, pair := range ratioPairs {
		for _, a := range rep.Rows {
			if a.Via != pair[0] {
				continue
			}
			for _, b := range rep.Rows {
				if b.Via != pair[1] || b.Name != a.Name || b.Backend != a.Backend {
					continue
				}
				out = append(out, Ratio{Row: a.Name, Backend: a.Backend, Of: pair[0] + "/" + pair[1],
					P50: div(float64(a.P50), float64(b.P50)), P99: div(float64(a.P99), float64(b.P99)),
					Throughput: div(a.throughput(), b.throughput())})
			}
		}
	}
	return out
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// cores is the average number of CPUs the working process (and its
// commands) used during the row.
func (r Row) cores() float64 { return div(r.CPU.Seconds(), r.Elapsed.Seconds()) }

// throughput is MB/s for data rows, calls/s otherwise.
func (r Row) throughput() float64 {
	if r.MBps > 0 {
		return r.MBps
	}
	return r.Throughput
}

// WriteTable prints the rows, the ratios and the verdicts as aligned
// text tables.
func (rep *Report) WriteTable(w io.Writer) {
	t := &table{header: []string{"ROW", "TARGET", "CALLS", "ERR", "P50 ms", "P90 ms", "P99 ms", "THROUGHPUT", "PEAK RSS", "CPU", "NOTE"},
		right: []bool{false, false, true, true, true, true, true, true, true, true, false}}
	for _, r := range rep.Rows {
		tp := fmt.Sprintf("%.0f/s", r.Throughput)
		if r.MBps > 0 {
			tp = fmt.Sprintf("%.0f MB/s", r.MBps)
		}
		rss := "-"
		if r.PeakRSS > 0 {
			rss = fmt.Sprintf("%.1f MiB", mib(r.PeakRSS))
		}
		note := r.Note
		if r.FirstError != "" {
			note = strings.TrimSpace(note + " first error: " + oneLine(r.FirstError))
		}
		t.add(r.Name, r.Target, fmt.Sprint(r.Count), fmt.Sprint(r.Errors),
			fmtMs(r.P50), fmtMs(r.P90), fmtMs(r.P99), tp, rss, fmt.Sprintf("%.2f", r.cores()), note)
	}
	t.write(w)
	fmt.Fprintf(w, "%d CPUs, 1-minute load average %s at the start, %s at the end.\n", runtime.NumCPU(), rep.LoadAvg[0], rep.LoadAvg[1])
	fmt.Fprintln(w, "PEAK RSS and CPU (average cores, with the commands it ran) are the broker process's on http and mcp rows, this harness's on the others.")

	if rs := rep.ratios(); len(rs) > 0 {
		fmt.Fprintln(w, "\nRatios")
		t := &table{header: []string{"ROW", "BACKEND", "OF", "P50", "P99", "THROUGHPUT"},
			right: []bool{false, false, false, true, true, true}}
		for _, r := range rs {
			t.add(r.Row, r.Backend, r.Of, fmt.Sprintf("%.1fx", r.P50), fmt.Sprintf("%.1fx", r.P99), fmt.Sprintf("%.2fx", r.Throughput))
		}
		t.write(w)
	}

	if vs := rep.verdicts(); len(vs) > 0 {
		fmt.Fprintln(w, "\nTargets")
		t := &table{header: []string{"", "ROW", "TARGET", "GOAL", "MEASURED", "NOTE"},
			right: []bool{false, false, false, false, true, false}}
		for _, v := range vs {
			verdict := "PASS"
			if !v.Pass {
				verdict = "FAIL"
			}
			t.add(verdict, v.Row, v.Target, v.Goal, strings.TrimSpace(fmtNum(v.Value)+" "+v.Unit), v.Note)
		}
		t.write(w)
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "\nERROR %s\n", f)
	}
}

// fmtMs formats a latency in milliseconds.
func fmtMs(d time.Duration) string { return fmtNum(ms(d)) }

// fmtNum formats a figure with about three significant digits, never in
// exponent form.
func fmtNum(v float64) string {
	switch {
	case v == math.Trunc(v) && v < 1e15:
		return fmt.Sprintf("%.0f", v)
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " | ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// formatBytes is a byte count in the largest binary unit that keeps it whole.
func formatBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// table is a minimal aligned text table.
type table struct {
	header []string
	right  []bool
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	width := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range append([][]string{t.header}, t.rows...) {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if t.right[i] {
				b.WriteString(pad + c)
			} else if i < len(r)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// jsonRow is a Row in the JSON report, with latencies in milliseconds.
type jsonRow struct {
	Name         string  `json:"name"`
	Target       string  `json:"target"`
	Backend      string  `json:"backend"`
	Via          string  `json:"via"`
	Calls        int     `json:"calls"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"firstError,omitempty"`
	P50Ms        float64 `json:"p50Ms"`
	P90Ms        float64 `json:"p90Ms"`
	P99Ms        float64 `json:"p99Ms"`
	MaxMs        float64 `json:"maxMs"`
	MeanMs       float64 `json:"meanMs"`
	ElapsedS     float64 `json:"elapsedS"`
	CallsPerS    float64 `json:"callsPerS"`
	MBPerS       float64 `json:"mbPerS,omitempty"`
	PeakRSSBytes int64   `json:"peakRssBytes"`
	CPUCores     float64 `json:"cpuCores"`
	Note         string  `json:"note,omitempty"`
}

// WriteJSON writes the report as indented JSON to path.
func (rep *Report) WriteJSON(path string) error {
	rows := make([]jsonRow, 0, len(rep.Rows))
	for _, r := range rep.Rows {
		rows = append(rows, jsonRow{
			Name: r.Name, Target: r.Target, Backend: r.Backend, Via: r.Via,
			Calls: r.Count, Errors: r.Errors, FirstError: r.FirstError,
			P50Ms: ms(r.P50), P90Ms: ms(r.P90), P99Ms: ms(r.P99), MaxMs: ms(r.Max), MeanMs: ms(r.Mean),
			ElapsedS: r.Elapsed.Seconds(), CallsPerS: r.Throughput, MBPerS: r.MBps,
			PeakRSSBytes: r.PeakRSS, CPUCores: r.cores(), Note: r.Note,
		})
	}
	cfg := rep.Config
	doc := map[string]any{
		"started": rep.Started.UTC().Format(time.RFC3339),
		"loadAvg": map[string]string{"start": rep.LoadAvg[0], "end": rep.LoadAvg[1]},
		"runtime": runtimeInfo(),
		"config": map[string]any{
			"duration": cfg.Duration.String(), "opTime": cfg.OpTime.String(), "clients": cfg.Clients,
			"rate": cfg.Rate, "streamBytes": cfg.StreamBytes, "streamRuns": cfg.StreamRuns,
			"only": cfg.Only, "targets": cfg.Targets, "brokerLogLevel": cfg.BrokerLogLevel, "quick": cfg.Quick,
		},
		"results":  rows,
		"ratios":   rep.ratios(),
		"targets":  rep.verdicts(),
		"failures": rep.Failures,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
