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
	end      time.Time
}

// Start marks the beginning of the measured window (for throughput).
func (r *Recorder) Start(t time.Time) {
	r.mu.Lock()
	r.start = t
	r.mu.Unlock()
}

// Stop marks the end of the measured window.
func (r *Recorder) Stop(t time.Time) {
	r.mu.Lock()
	r.end = t
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
	st := Stats{Count: len(s), Errors: r.errors, Elapsed: r.end.Sub(r.start)}
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

// RSSSampler tracks the peak resident set size of one process while a
// measurement runs. It resets the kernel's high-water mark (VmHWM) at
// the start when it may, so the peak belongs to this measurement, and
// also polls VmRSS, which catches the peak when the reset is refused.
type RSSSampler struct {
	pid     int
	resetOK bool
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	peak    int64 // bytes, the highest VmRSS seen
}

// StartRSS starts sampling pid every interval.
func StartRSS(pid int, interval time.Duration) *RSSSampler {
	s := &RSSSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	s.resetOK = resetPeakRSS(pid) == nil
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

func (s *RSSSampler) sample() {
	rss, err := procStatus(s.pid, "VmRSS")
	if err != nil {
		return
	}
	s.mu.Lock()
	s.peak = max(s.peak, rss)
	s.mu.Unlock()
}

// Stop ends sampling and returns the peak RSS in bytes (0 when the
// process could not be read). Call it before the process exits.
func (s *RSSSampler) Stop() int64 {
	close(s.stop)
	<-s.done
	s.sample()
	s.mu.Lock()
	peak := s.peak
	s.mu.Unlock()
	if s.resetOK {
		if hwm, err := procStatus(s.pid, "VmHWM"); err == nil {
			peak = max(peak, hwm)
		}
	}
	return peak
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
