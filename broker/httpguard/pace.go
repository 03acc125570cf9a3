package httpguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// ErrSlowBody: a request body stalled, or came slower than its minimum
// rate.
var ErrSlowBody = errors.New("request body too slow")

// PacedBody holds a request body to a minimum transfer rate: the
// connection's read deadline is moved, at every read, to
//
//	min(now + idle, start + idle + read/rate)
//
// so a stalled body times out after idle, and a body trickled a byte at a
// time (slowloris for bodies) falls behind the rate and times out too,
// however long it is. A handler may bring the deadline nearer (LimitTo:
// a whole-body deadline), never further.
type PacedBody struct {
	body  io.ReadCloser
	rc    *http.ResponseController
	idle  time.Duration
	rate  int64 // bytes per second
	start time.Time

	mu      sync.Mutex
	n       int64
	hard    time.Time // zero: none
	done    bool      // EOF or error: deadlines are no longer ours
	tripped error
}

func (p *PacedBody) Read(b []byte) (int, error) {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return p.body.Read(b)
	}
	_ = p.rc.SetReadDeadline(p.deadlineLocked())
	p.mu.Unlock()
	n, err := p.body.Read(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(n)
	if err == nil {
		return n, nil
	}
	p.done = true
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		// The server's background read that notices a client disconnect
		// runs under the same deadline: clear it once the body is over.
		// A body that timed out keeps its past deadline, so net/http's
		// attempt to drain the rest before answering fails at once and
		// the connection closes after the answer.
		_ = p.rc.SetReadDeadline(time.Time{})
		return n, err
	}
	p.tripped = fmt.Errorf("%w: %d bytes in %s; a body must keep coming at %d bytes/s after its first %s and never stall for %s",
		ErrSlowBody, p.n, time.Since(p.start).Round(time.Millisecond), p.rate, p.idle, p.idle)
	return n, p.tripped
}

func (p *PacedBody) deadlineLocked() time.Time {
	d := time.Now().Add(p.idle)
	if p.rate > 0 {
		d = minTime(d, p.start.Add(p.idle+time.Duration(float64(p.n)/float64(p.rate)*float64(time.Second))))
	}
	if !p.hard.IsZero() {
		d = minTime(d, p.hard)
	}
	return d
}

// LimitTo brings the deadline to t at the latest.
func (p *PacedBody) LimitTo(t time.Time) {
	p.mu.Lock()
	if p.hard.IsZero() || t.Before(p.hard) {
		p.hard = t
	}
	p.mu.Unlock()
}

// Slow returns the error that ended the body, when it was too slow.
func (p *PacedBody) Slow() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tripped
}

func (p *PacedBody) Close() error { return p.body.Close() }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

type paceKey struct{}

// PacerFrom returns the request's paced body, or nil.
func PacerFrom(ctx context.Context) *PacedBody {
	p, _ := ctx.Value(paceKey{}).(*PacedBody)
	return p
}

// Pace puts every request body under a minimum rate of rate bytes per
// second after its first idle, and never stalled for idle (PacedBody);
// handlers find it with PacerFrom. idle <= 0 turns pacing off; rate <= 0
// keeps only the stall limit.
func Pace(idle time.Duration, rate int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil || r.Body == http.NoBody || idle <= 0 {
				next.ServeHTTP(w, r)
				return
			}
			p := &PacedBody{body: r.Body, rc: http.NewResponseController(w), idle: idle, rate: rate, start: time.Now()}
			r.Body = p
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), paceKey{}, p)))
		})
	}
}
