package bgproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Limits bound a workspace's background processes.
type Limits struct {
	// LogBytes is the size of each process's log. Default 4 MiB.
	LogBytes int64
	// Processes is the most a workspace keeps, running or ended; an ended
	// one is forgotten, oldest first, to make room. Default 32.
	Processes int
	// StdinBytes is what a process's stdin queues for a command that has
	// not read it yet. Default 256 KiB.
	StdinBytes int
}

// Defaults of Limits.
const (
	DefaultLogBytes   = 4 << 20
	DefaultProcesses  = 32
	DefaultStdinBytes = 256 << 10
)

func (l Limits) withDefaults() Limits {
	if l.LogBytes <= 0 {
		l.LogBytes = DefaultLogBytes
	}
	if l.Processes <= 0 {
		l.Processes = DefaultProcesses
	}
	if l.StdinBytes <= 0 {
		l.StdinBytes = DefaultStdinBytes
	}
	return l
}

// ErrNotFound is an unknown process id.
var ErrNotFound = fmt.Errorf("%w: no such background process", opsapi.ErrNotExist)

// errTableClosed refuses starts once the workspace is going.
var errTableClosed = fmt.Errorf("%w: the workspace is being deleted", opsapi.ErrNotExist)

// Table holds one workspace's background processes; their logs live in
// its directory.
type Table struct {
	dir    string
	limits Limits

	mu     sync.Mutex
	procs  map[string]*Process
	closed bool
}

// NewTable keeps processes' logs in dir, which it creates (and Close
// removes).
func NewTable(dir string, l Limits) *Table {
	return &Table{dir: dir, limits: l.withDefaults(), procs: map[string]*Process{}}
}

// Start starts spec through run and returns at once. ctx is the
// process's life: it must outlive the request that starts it, and its
// end kills the process.
func (t *Table) Start(ctx context.Context, spec Spec, run RunFunc) (*Process, error) {
	if spec.Command == "" {
		spec.Command = spec.Request.Command
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errTableClosed
	}
	if err := t.makeRoom(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return nil, fmt.Errorf("process logs: %w", err)
	}
	id := newID()
	log, err := NewRing(filepath.Join(t.dir, id+".log"), t.limits.LogBytes)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	p := &Process{id: id, spec: spec, started: time.Now(), log: log, cancel: cancel,
		signals: make(chan syscall.Signal), done: make(chan struct{})}
	if spec.Stdin {
		p.stdin = newStdinQueue(t.limits.StdinBytes)
	}
	t.procs[id] = p
	go func() {
		defer cancel(nil)
		p.run(ctx, run)
	}()
	return p, nil
}

// makeRoom forgets the oldest ended process when the table is full;
// t.mu is held.
func (t *Table) makeRoom() error {
	if len(t.procs) < t.limits.Processes {
		return nil
	}
	var oldest *Process
	for _, p := range t.procs {
		select {
		case <-p.done:
			if oldest == nil || p.started.Before(oldest.started) {
				oldest = p
			}
		default:
		}
	}
	if oldest == nil {
		return opsapi.E("processes", "", opsapi.ErrDenied,
			fmt.Errorf("the workspace has %d background processes running, the most it may", len(t.procs)))
	}
	delete(t.procs, oldest.id)
	return oldest.log.Remove()
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "p-" + hex.EncodeToString(b)
}

// Get finds process id.
func (t *Table) Get(id string) (*Process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.procs[id]
	if !ok {
		return nil, fmt.Errorf("process %q: %w", id, ErrNotFound)
	}
	return p, nil
}

// List describes every process, oldest first.
func (t *Table) List() []Info {
	t.mu.Lock()
	ps := make([]*Process, 0, len(t.procs))
	for _, p := range t.procs {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool {
		if !ps[i].started.Equal(ps[j].started) {
			return ps[i].started.Before(ps[j].started)
		}
		return ps[i].id < ps[j].id
	})
	out := make([]Info, len(ps))
	for i, p := range ps {
		out[i] = p.Info()
	}
	return out
}

// Remove kills process id's tree if it still runs, waits for its end
// (or ctx), forgets it and deletes its log. It returns its last Info.
func (t *Table) Remove(ctx context.Context, id string) (Info, error) {
	p, err := t.Get(id)
	if err != nil {
		return Info{}, err
	}
	if err := p.kill(ctx, errors.New("background process deleted")); err != nil {
		return Info{}, err
	}
	t.mu.Lock()
	delete(t.procs, id)
	t.mu.Unlock()
	info := p.Info()
	return info, p.log.Remove()
}

// Close kills every process, waits for them (or ctx), and removes the
// logs and the directory. Starts fail from then on.
func (t *Table) Close(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	ps := make([]*Process, 0, len(t.procs))
	for _, p := range t.procs {
		ps = append(ps, p)
	}
	t.procs = map[string]*Process{}
	t.mu.Unlock()
	var errs []error
	for _, p := range ps {
		p.cancel(errors.New("workspace deleted"))
	}
	for _, p := range ps {
		if err := p.kill(ctx, nil); err != nil {
			errs = append(errs, err)
		}
		if err := p.log.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(t.dir); err != nil {
		errs = append(errs, fmt.Errorf("process logs: %w", err))
	}
	return errors.Join(errs...)
}
