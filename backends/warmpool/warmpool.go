package warmpool

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/wsbroker/wsbroker/internal/bytesize"
	"github.com/wsbroker/wsbroker/opsapi"
)

// MaxSize bounds one pool: each member is a running workspace.
const MaxSize = 64

// Pool holds up to its size ready members of type M.
type Pool[M any] struct {
	ready chan M
	want  chan struct{} // wakes the filler
}

// New is an empty pool of size members.
func New[M any](size int) *Pool[M] {
	return &Pool[M]{ready: make(chan M, size), want: make(chan struct{}, 1)}
}

// Size is how many members the pool keeps.
func (p *Pool[M]) Size() int { return cap(p.ready) }

// Ready is how many members are ready now.
func (p *Pool[M]) Ready() int { return len(p.ready) }

// Status is how full the pool is, under name (opsapi.PoolReporter).
func (p *Pool[M]) Status(name string) opsapi.PoolStatus {
	return opsapi.PoolStatus{Name: name, Size: p.Size(), Ready: p.Ready()}
}

// Put adds m when the pool has room, and says whether it had: a member
// that did not fit is the caller's to remove.
func (p *Pool[M]) Put(m M) bool {
	select {
	case p.ready <- m:
		return true
	default:
		return false
	}
}

// Take is a ready member for which alive holds, or false when none is
// ready. Members that are not alive go to discard on the way. Either
// way the filler is woken to make up for what was taken.
func (p *Pool[M]) Take(alive func(M) bool, discard func(M)) (M, bool) {
	defer p.wake()
	for {
		select {
		case m := <-p.ready:
			if alive(m) {
				return m, true
			}
			discard(m)
		default:
			var none M
			return none, false
		}
	}
}

func (p *Pool[M]) wake() {
	select {
	case p.want <- struct{}{}:
	default:
	}
}

// Fill keeps the pool full until ctx ends, making one member at a time
// with make whenever one is missing. A member that could not be made is
// logged and tried again after retry; one that no longer fits (a member
// given back filled the pool meanwhile) goes to remove.
func (p *Pool[M]) Fill(ctx context.Context, make func(context.Context) (M, error), remove func(M), retry time.Duration, logger *slog.Logger) {
	for ctx.Err() == nil {
		if p.Ready() < p.Size() {
			m, err := make(ctx)
			if err != nil {
				if ctx.Err() == nil {
					logger.Warn("a pool member could not be made; trying again later", "err", err, "retry", retry)
					sleep(ctx, retry)
				}
				continue
			}
			if !p.Put(m) {
				remove(m)
			}
			continue
		}
		select {
		case <-p.want:
		case <-ctx.Done():
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Spec is what every backend's pool configuration has (docker's and
// kubernetes' PoolConfig embed it with `yaml:",inline"`): its name, its
// size, and the create options its members have that every backend
// knows. A backend's PoolConfig adds its own options beside it.
type Spec struct {
	// Name names the pool in logs, labels and metrics.
	Name string `json:"name" yaml:"name"`
	// Size is how many ready members the pool keeps, 1 to MaxSize.
	Size int `json:"size" yaml:"size"`
	// Image, Memory and CPUs are create options, checked as a request's
	// are; empty is the configured default.
	Image  string        `json:"image" yaml:"image"`
	Memory bytesize.Size `json:"memory" yaml:"memory"`
	CPUs   float64       `json:"cpus" yaml:"cpus"`
}

// Check reports every problem with pools: names that validName refuses
// or that repeat, sizes outside 1 to MaxSize.
func Check(pools []Spec, validName func(string) bool) []error {
	var errs []error
	names := map[string]bool{}
	for i, p := range pools {
		if !validName(p.Name) || names[p.Name] {
			errs = append(errs, fmt.Errorf("pools[%d]: name %q must be unique, 1 to 63 letters, digits, '.', '_' or '-'", i, p.Name))
		}
		names[p.Name] = true
		if p.Size < 1 || p.Size > MaxSize {
			errs = append(errs, fmt.Errorf("pools[%d] (%s): size %d must be between 1 and %d", i, p.Name, p.Size, MaxSize))
		}
	}
	return errs
}
