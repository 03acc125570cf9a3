package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Recorder collects the latencies and errors of one measurement. It is
// safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	samples  []time.Duration
	errors   int
	firstErr error
	start    time.Time
	elapsed  time.Duration // of the windows already stopped
}

// Start marks the beginning of a measured window (for throughput).
func (r *Recorder) Start(t time.Time) {
	r.mu.Lock()
	r.start = t
	r.mu.Unlock()
}

// Stop marks the end of the window Start began. A row measured in
// several windows (interleaved with other targets) has their sum as its
// elapsed time.
func (r *Recorder) Stop(t time.Time) {
	r.mu.Lock()
	r.elapsed += t.Sub(r.start)
	r.mu.Unlock()
}

// Record adds one call's latency; a failed call counts as an error and
// its latency is still recorded (a slow failure is still slow).
func (r *Recorder) Record(d time.Duration, err error) {
	r.mu.Lock()
	r.samples = append(r.samples, d)
	if err != nil {
		r.errors++
		if r.firstErr == nil {
			r.firstErr = err
		}
	}
	r.mu.Unlock()
}

// Fail counts an error that has no latency to record (a warm-up call).
func (r *Recorder) Fail(err error) {
	r.mu.Lock()
	r.errors++
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.mu.Unlock()
}

// Stats summarises a Recorder.
type Stats struct {
	Count      int
	Errors     int
	FirstError string
	P50        time.Duration
	P90        time.Duration
	P99        time.Duration
	Max        time.Duration
	Mean       time.Duration
	Elapsed    time.Duration
	// Throughput is calls per second over the measured window.
	Throughput float64
}

// Stats returns the percentiles (nearest rank) and throughput so far.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	s := slices.Clone(r.samples)
	st := Stats{Count: len(s), Errors: r.errors, Elapsed: r.elapsed}
	if r.firstErr != nil {
		st.FirstError = r.firstErr.Error()
	}
	r.mu.Unlock()
	if len(s) == 0 {
		return st
	}
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	st.P50, st.P90, st.P99 = percentile(s, 0.50), percentile(s, 0.90), percentile(s, 0.99)
	st.Max = s[len(s)-1]
	st.Mean = sum / time.Duration(len(s))
	if st.Elapsed > 0 {
		st.Throughput = float64(len(s)) / st.Elapsed.Seconds()
	}
	return st
}

// percentile returns the nearest-rank p-quantile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ProcSampler tracks one process while a measurement runs: its peak
// resident set size and the CPU time it and its waited-for children
// (commands, ripgrep) used. It resets the kernel's RSS high-water mark
// (VmHWM) at the start when it may, so the peak belongs to this
// measurement, and also polls VmRSS, which catches the peak when the
// reset is refused.
type ProcSampler struct {
	pid     int
	resetOK bool
	cpu0    time.Duration
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	peak    int64 // bytes, the highest VmRSS seen
}

// Usage is what a ProcSampler measured; zero fields are unknown.
type Usage struct {
	PeakRSS int64         // bytes
	CPU     time.Duration // user+system, the process and its children
}

// StartSampler starts sampling pid every interval.
func StartSampler(pid int, interval time.Duration) *ProcSampler {
	s := &ProcSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	s.resetOK = resetPeakRSS(pid) == nil
	s.cpu0, _ = procCPU(pid)
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *ProcSampler) sample() {
	rss, err := procStatus(s.pid, "VmRSS")
	if err != nil {
		return
	}
	s.mu.Lock()
	s.peak = max(s.peak, rss)
	s.mu.Unlock()
}

// Stop ends sampling and returns the usage since Start. Call it before
// the process exits.
func (s *ProcSampler) Stop() Usage {
	close(s.stop)
	<-s.done
	s.sample()
	s.mu.Lock()
	u := Usage{PeakRSS: s.peak}
	s.mu.Unlock()
	if s.resetOK {
		if hwm, err := procStatus(s.pid, "VmHWM"); err == nil {
			u.PeakRSS = max(u.PeakRSS, hwm)
		}
	}
	if cpu, err := procCPU(s.pid); err == nil && s.cpu0 > 0 {
		u.CPU = cpu - s.cpu0
	}
	return u
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTick = time.Second / 100

// procCPU returns utime+stime+cutime+cstime of pid.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// plain. utime is field 14, so the 12th after the closing paren.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, field := range f[11:15] {
		n, err := strconv.ParseInt(string(field), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// resetPeakRSS resets pid's VmHWM to its current RSS (Linux 4.0+, allowed
// for our own processes).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// procStatus reads one "kB" field of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	prefix := []byte(field + ":")
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, prefix) {
			continue
		}
		f := bytes.Fields(line[len(prefix):])
		if len(f) < 1 {
			break
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s in /proc/%d/status: %w", field, pid, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
