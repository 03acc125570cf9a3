package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Result is one measured row for one target.
type Result struct {
	Name string
	Stats
	// Usage is the peak RSS and CPU time of the process doing the work
	// (the broker over HTTP, the harness in-process) while the row ran.
	Usage
	// MBps, when set, is the throughput in bytes (1e6) per second, for
	// rows that move data rather than count calls.
	MBps float64
	Note string
}

// Scenario measures a group of rows on one fresh session of a target, or
// on one fresh session of every target of a backend at once.
type Scenario struct {
	// Rows lists the row names the scenario can produce.
	Rows func(cfg Config) []string
	// Run measures rows (a non-empty subset of Rows, in order). A row
	// the target's clients lack is skipped.
	Run func(ctx context.Context, env *Env, s *Session, rows []string) ([]Result, error)
	// RunAll, when set instead of Run, measures rows on the sessions of
	// all of one backend's targets together; out[i] are sessions[i]'s
	// results.
	RunAll func(ctx context.Context, env *Env, sessions []*Session, rows []string) (out [][]Result, err error)
	// On, when set, picks the targets the scenario runs on; the others
	// are not even set up for it.
	On func(t Target) bool
}

// scenarios lists every scenario of a run, in table order.
func scenarios() []Scenario {
	return []Scenario{
		{Rows: func(Config) []string { return latencyOps }, RunAll: runLatency},
		{Rows: func(Config) []string { return loadRows() }, Run: runLoad},
		{Rows: func(Config) []string { return []string{streamBase64} }, Run: runStream},
		{Rows: func(Config) []string { return hostileRows }, Run: runHostile, On: onLocalHTTP},
	}
}

// Per-call latency: one caller, warm-up first, then calls for OpTime.
const (
	warmupCalls = 20
	minCalls    = 5
	maxCalls    = 200_000
	// rowSlack bounds a row beyond OpTime, so a hung call fails the row
	// instead of hanging the run.
	rowSlack = 2 * time.Minute
)

// latencyRounds is how many turns each target gets per row. The machines
// are shared and their load drifts over seconds, so targets that are
// compared (the ratios, the targets relative to a raw baseline) take
// turns, each turn OpTime/latencyRounds long, in an order that rotates:
// every target sees the same machine.
const latencyRounds = 10

// runLatency measures each row on every session, one caller at a time,
// the sessions taking turns.
func runLatency(ctx context.Context, env *Env, sessions []*Session, rows []string) ([][]Result, error) {
	clients := make([]Client, len(sessions))
	for i, s := range sessions {
		cl, err := s.NewClient(0)
		if err != nil {
			return nil, err
		}
		clients[i] = cl
	}
	out := make([][]Result, len(sessions))
	for _, name := range rows {
		var turns []*latencyTurns
		for i, cl := range clients {
			if op, ok := cl[name]; ok {
				turns = append(turns, &latencyTurns{session: i, s: sessions[i], op: op})
			}
		}
		if len(turns) == 0 {
			continue
		}
		if err := latencyRow(ctx, env, name, turns); err != nil {
			return out, err
		}
		for _, t := range turns {
			res := Result{Name: name, Stats: t.rec.Stats(), Usage: t.usage}
			if b := rowBytes(name, env.Config); b > 0 && res.P50 > 0 {
				res.MBps = float64(b) / 1e6 / res.P50.Seconds()
			}
			out[t.session] = append(out[t.session], res)
		}
	}
	return out, nil
}

// latencyTurns is one session's share of a row.
type latencyTurns struct {
	session int
	s       *Session
	op      Op
	rec     Recorder
	usage   Usage // peak RSS over the turns, CPU summed
}

// latencyRow warms every session's op up, then gives each its turns.
// Failed calls, warm-up included, are counted as the row's errors; they
// do not stop the row.
func latencyRow(ctx context.Context, env *Env, name string, turns []*latencyTurns) error {
	ctx, cancel := context.WithTimeout(ctx, env.Config.OpTime+rowSlack)
	defer cancel()
	warmups := warmupCalls
	if name == opCreate || name == opCreateWarm {
		// A create is seconds on a cluster; two warm the images and caches.
		warmups = 2
	}
	for _, t := range turns {
		for range warmups {
			if _, err := timeOp(ctx, t.op); err != nil {
				t.rec.Fail(fmt.Errorf("warm-up: %w", err))
			}
		}
	}
	slice := env.Config.OpTime / latencyRounds
	for round := range latencyRounds {
		for k := range turns {
			t := turns[(round+k)%len(turns)]
			calls := 0
			if round == latencyRounds-1 {
				calls = minCalls - t.rec.Stats().Count // at least minCalls in all
			}
			if err := t.turn(ctx, name, slice, calls, env.Config.SampleEvery); err != nil {
				return err
			}
		}
	}
	return nil
}

// turn calls the op for d, and at least min times.
func (t *latencyTurns) turn(ctx context.Context, name string, d time.Duration, min int, sampleEvery time.Duration) error {
	proc := StartSampler(t.s.PID, sampleEvery)
	start := time.Now()
	deadline := start.Add(d)
	t.rec.Start(start)
	for i := 0; i < maxCalls/latencyRounds && (i < min || time.Now().Before(deadline)); i++ {
		if err := ctx.Err(); err != nil {
			proc.Stop()
			return fmt.Errorf("%s: %w", name, err)
		}
		d, err := timeOp(ctx, t.op)
		t.rec.Record(d, err)
	}
	t.rec.Stop(time.Now())
	u := proc.Stop()
	t.usage.PeakRSS = max(t.usage.PeakRSS, u.PeakRSS)
	t.usage.CPU += u.CPU
	return nil
}

// loadMixed is the mixed workload of many concurrent clients: read,
// write, stat, ls, bash `true` and grep, as operations.
const loadMixed = "load.mixed"

var loadMix = []string{opRead4K, opWrite4K, opStat, opReadDir, opExecTrue, opSearch}

// loadRows are the load scenario's rows: the whole mix, then each kind
// of call within it.
func loadRows() []string {
	rows := []string{loadMixed}
	for _, op := range loadMix {
		rows = append(rows, loadMixed+"/"+op)
	}
	return rows
}

// runLoad runs Clients concurrent clients for Duration. Each issues the
// mix in turn, starting at a different op so every kind is in flight at
// every moment. With Rate > 0 each client is paced at Rate calls per
// second and a call's latency counts from its scheduled start, so a
// stalled server is charged for the calls queued behind it (no
// coordinated omission); with Rate 0 clients call back to back.
func runLoad(ctx context.Context, env *Env, s *Session, rows []string) ([]Result, error) {
	cfg := env.Config
	clients, err := loadClients(s, cfg.Clients)
	if clients == nil || err != nil {
		return nil, err // nil, nil: the target cannot run the mix
	}
	rec := newLoadRecorders()
	warmUp(ctx, clients, rec)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	proc := StartSampler(s.PID, cfg.SampleEvery)
	start := time.Now()
	end := start.Add(cfg.Duration)
	// Calls still running at the end are waited for, but not forever.
	ctx, cancel := context.WithDeadline(ctx, end.Add(time.Minute))
	defer cancel()
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	forEachClient(clients, func(i int, cl Client) {
		phase := time.Duration(0)
		if interval > 0 {
			phase = interval * time.Duration(i) / time.Duration(len(clients))
		}
		driveClient(ctx, cl, i, loadSchedule{start: start.Add(phase), end: end, interval: interval}, rec)
	})
	stop := time.Now()
	usage := proc.Stop()
	note := fmt.Sprintf("%d clients, closed loop", cfg.Clients)
	if interval > 0 {
		note = fmt.Sprintf("%d clients x %g calls/s", cfg.Clients, cfg.Rate)
	}
	var out []Result
	for _, row := range rows {
		r := rec.total
		if row != loadMixed {
			r = rec.perOp[row[len(loadMixed)+1:]]
		}
		r.Start(start)
		r.Stop(stop)
		out = append(out, Result{Name: row, Stats: r.Stats(), Usage: usage, Note: note})
	}
	return out, nil
}

// loadClients makes n clients of the session; nil (and no error) when
// the target lacks an op of the mix.
func loadClients(s *Session, n int) ([]Client, error) {
	clients := make([]Client, n)
	for i := range clients {
		cl, err := s.NewClient(i)
		if err != nil {
			return nil, err
		}
		for _, op := range loadMix {
			if _, ok := cl[op]; !ok {
				return nil, nil
			}
		}
		clients[i] = cl
	}
	return clients, nil
}

// loadRecorders record the whole mix and each op of it.
type loadRecorders struct {
	total *Recorder
	perOp map[string]*Recorder
}

func newLoadRecorders() loadRecorders {
	rec := loadRecorders{total: &Recorder{}, perOp: map[string]*Recorder{}}
	for _, op := range loadMix {
		rec.perOp[op] = &Recorder{}
	}
	return rec
}

func (rec loadRecorders) record(op string, lat time.Duration, err error) {
	rec.total.Record(lat, err)
	rec.perOp[op].Record(lat, err)
}

func (rec loadRecorders) fail(op string, err error) {
	rec.total.Fail(err)
	rec.perOp[op].Fail(err)
}

// warmUp has every client run the mix once (connections, page cache).
// Its failures count as errors too; zero errors means zero.
func warmUp(ctx context.Context, clients []Client, rec loadRecorders) {
	forEachClient(clients, func(i int, cl Client) {
		for _, op := range loadMix {
			if err := cl[op](ctx); err != nil {
				rec.fail(op, fmt.Errorf("warm-up, client %d: %w", i, err))
			}
		}
	})
}

// loadSchedule is one client's pacing: call k is due at start +
// k*interval (interval 0: back to back), and none starts at or after end.
type loadSchedule struct {
	start, end time.Time
	interval   time.Duration
}

// driveClient runs client i's share of the mix on its schedule until the
// end or ctx ends. A paced call's latency counts from when it was due.
func driveClient(ctx context.Context, cl Client, i int, sch loadSchedule, rec loadRecorders) {
	for k := 0; ctx.Err() == nil; k++ {
		due := time.Now()
		if sch.interval > 0 {
			due = sch.start.Add(time.Duration(k) * sch.interval)
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		if !due.Before(sch.end) {
			return
		}
		name := loadMix[(i+k)%len(loadMix)]
		err := cl[name](ctx)
		rec.record(name, time.Since(due), err)
	}
}

// forEachClient runs fn for every client concurrently and waits.
func forEachClient(clients []Client, fn func(i int, cl Client)) {
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() { fn(i, cl) })
	}
	wg.Wait()
}

// runStream pipes StreamBytes of zeros through base64 in the bash tool,
// StreamRuns times, and reports the output rate (base64 bytes produced
// per second of wall time) and the peak RSS.
func runStream(ctx context.Context, env *Env, s *Session, rows []string) ([]Result, error) {
	cl, err := s.NewClient(0)
	if err != nil {
		return nil, err
	}
	op, ok := cl[streamBase64]
	if !ok {
		return nil, nil
	}
	cfg := env.Config
	proc := StartSampler(s.PID, cfg.SampleEvery)
	var rec Recorder
	start := time.Now()
	rec.Start(start)
	for range cfg.StreamRuns {
		t0 := time.Now()
		err := op(ctx)
		rec.Record(time.Since(t0), err)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	rec.Stop(time.Now())
	st := rec.Stats()
	out := float64(base64Len(cfg.StreamBytes)) * float64(st.Count-st.Errors)
	return []Result{{
		Name:  streamBase64,
		Stats: st,
		Usage: proc.Stop(),
		MBps:  out / 1e6 / st.Elapsed.Seconds(),
		Note:  fmt.Sprintf("head -c %s /dev/zero | base64", formatBytes(cfg.StreamBytes)),
	}}, nil
}

// runsOn reports whether the scenario runs on t.
func (sc Scenario) runsOn(t Target) bool { return sc.On == nil || sc.On(t) }

// untimedKey keys the work an op leaves to run after its time is taken.
type untimedKey struct{}

// Untimed runs f after the op calling it has been timed: tearing down
// what the op made is not part of its time. Outside timeOp, f runs now.
// Its error counts as the op's: timeOp joins it, and outside timeOp f
// runs at once and Untimed returns its error.
func Untimed(ctx context.Context, f func() error) error {
	if after, ok := ctx.Value(untimedKey{}).(*[]func() error); ok {
		*after = append(*after, f)
		return nil
	}
	return f()
}

// timeOp times one call of op, then runs what it left with Untimed.
func timeOp(ctx context.Context, op Op) (time.Duration, error) {
	var after []func() error
	t0 := time.Now()
	err := op(context.WithValue(ctx, untimedKey{}, &after))
	d := time.Since(t0)
	for _, f := range after {
		err = errors.Join(err, f())
	}
	return d, err
}
