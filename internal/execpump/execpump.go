package execpump

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// readBufSize is the one buffer command output passes through.
const readBufSize = 32 << 10

// Config says where output goes and how long a call may last.
type Config struct {
	// Output receives the command's output; nil drops it. After its first
	// failed Write the output is still read (and dropped), so the command
	// never blocks on a caller that has gone.
	Output io.Writer
	// Timeout kills the command when it expires; zero means none.
	Timeout time.Duration
	// DrainIdle and MaxDrain bound the draining after the exit (see the
	// package documentation). Both must be positive.
	DrainIdle, MaxDrain time.Duration
	// Pending, when the backend can tell, says how many bytes of output
	// wait unread (a pipe's FIONREAD): while any do, the output is not
	// quiet, whatever the clock says. Optional.
	Pending func() int
	// Kill kills the command's whole tree and returns how many processes
	// it killed. Run calls it at most once, on its own goroutine.
	Kill func() int
	// GiveUp is how long Run waits for the exit once the kill has run
	// before it abandons the command; zero waits for ever.
	GiveUp time.Duration
	// Close is called as Run returns, to unblock a pending read of the
	// output (e.g. close the pipe). Optional.
	Close func()
	// CloseWait bounds the wait for the reader to stop after Close; zero
	// waits until it has.
	CloseWait time.Duration
}

// Event is what a backend's watcher reports about the command.
type Event struct {
	// Exited says the command has ended; Status says how, when known.
	Exited bool
	Status *Status
	// Err ends the call at once with Err. Unless Fatal, it is ignored
	// while a kill runs.
	Err   error
	Fatal bool
}

// Status is how a command ended.
type Status struct {
	Code   int    // exit status; 128+N when killed by signal N
	Signal string // "SIGTERM", when known
}

// Result is what Run saw of the call.
type Result struct {
	// ExecResult holds ExitCode and Signal (from the last Event with a
	// Status), TimedOut, Canceled and Killed; the caller fills the rest.
	opsapi.ExecResult
	// StatusKnown says an Event gave a Status.
	StatusKnown bool
	// Abandoned says the command survived its kill for GiveUp.
	Abandoned bool
}

// Run relays output from out until the call is over (see the package
// documentation) and returns what happened. It returns an error only for
// an Event with Err.
func Run(ctx context.Context, out io.Reader, events <-chan Event, cfg Config) (Result, error) {
	p := &pump{cfg: cfg, events: events, done: ctx.Done(), outputOK: cfg.Output != nil}
	p.startReader(out)
	defer p.stopReader()
	if cfg.Timeout > 0 {
		t := time.NewTimer(cfg.Timeout)
		defer t.Stop()
		p.deadline = t.C
	}
	p.idle = time.NewTimer(time.Hour)
	p.idle.Stop()
	defer p.idle.Stop()
	defer p.stopTimers()
	for !p.over() {
		if err := p.step(); err != nil {
			return Result{}, err
		}
	}
	return p.res, nil
}

// pump is one call's state; only Run's goroutine touches it.
type pump struct {
	cfg    Config
	events <-chan Event
	res    Result

	// The reader goroutine's side.
	chunks   chan []byte
	ack      chan struct{}
	readDone chan struct{}   // closed when the reader stops
	readC    <-chan struct{} // readDone until seen, then nil
	quit     chan struct{}
	// inRead is when the reader's pending Read began (UnixNano), 0 while
	// it is not in one: handing a chunk over, or not scheduled yet.
	inRead atomic.Int64

	deadline, giveUpC <-chan time.Time
	done              <-chan struct{}
	idle              *time.Timer
	idleC, capC       <-chan time.Time
	// drainCap is MaxDrain's timer and capEnd when it fires; time spent
	// in Output.Write moves capEnd on.
	drainCap *time.Timer
	capEnd   time.Time
	timers   []*time.Timer // to stop when Run returns
	killDone chan int

	exited, eof, outputOK bool
}

// startReader reads out on a goroutine that hands each chunk over and
// waits until it has been written, so one buffer suffices and writes stay
// serial.
func (p *pump) startReader(out io.Reader) {
	p.chunks = make(chan []byte)
	p.ack = make(chan struct{})
	p.readDone = make(chan struct{})
	p.readC = p.readDone
	p.quit = make(chan struct{})
	go func() {
		defer close(p.readDone)
		buf := make([]byte, readBufSize)
		for {
			p.inRead.Store(time.Now().UnixNano())
			n, err := out.Read(buf)
			p.inRead.Store(0)
			if n > 0 && !p.handOver(buf[:n]) {
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// handOver gives b to Run and waits until it is written; false when Run
// has returned.
func (p *pump) handOver(b []byte) bool {
	select {
	case p.chunks <- b:
	case <-p.quit:
		return false
	}
	select {
	case <-p.ack:
		return true
	case <-p.quit:
		return false
	}
}

// stopReader ends the reader goroutine as Run returns.
func (p *pump) stopReader() {
	close(p.quit)
	if p.cfg.Close != nil {
		p.cfg.Close()
	}
	if p.cfg.CloseWait <= 0 {
		<-p.readDone
		return
	}
	t := time.NewTimer(p.cfg.CloseWait)
	defer t.Stop()
	select {
	case <-p.readDone:
	case <-t.C:
	}
}

func (p *pump) stopTimers() {
	for _, t := range p.timers {
		t.Stop()
	}
}

func (p *pump) newTimer(d time.Duration) <-chan time.Time {
	t := time.NewTimer(d)
	p.timers = append(p.timers, t)
	return t.C
}

// over says the command has exited, any kill has finished, and the output
// has ended or gone quiet (or hit its cap).
func (p *pump) over() bool {
	return p.exited && p.killDone == nil && (p.eof || p.idleC == nil && p.capC == nil)
}

// step waits for the next thing to happen and handles it.
func (p *pump) step() error {
	select {
	case b := <-p.chunks:
		p.write(b)
	case <-p.readC:
		p.eof, p.readC = true, nil
	case ev := <-p.events:
		return p.event(ev)
	case <-p.deadline:
		p.res.TimedOut = true
		p.kill()
	case <-p.done:
		p.res.Canceled = true
		p.kill()
	case n := <-p.killDone:
		p.res.Killed += n
		p.killDone = nil
		if !p.exited && p.cfg.GiveUp > 0 {
			p.giveUpC = p.newTimer(p.cfg.GiveUp)
		}
	case <-p.giveUpC:
		p.res.Abandoned = true
		p.exited, p.idleC, p.capC, p.giveUpC = true, nil, nil, nil
	case <-p.idleC:
		if wait := p.notQuiet(); wait > 0 {
			p.idle.Reset(wait)
			break
		}
		p.idleC, p.capC = nil, nil
	case <-p.capC:
		p.idleC, p.capC = nil, nil
	}
	return nil
}

// write passes one chunk on and lets the reader go on. The time the
// caller takes to accept it is not the command's: it does not count
// towards DrainIdle or MaxDrain, so a caller that reads slowly still gets
// every byte the command wrote before it exited.
func (p *pump) write(b []byte) {
	start := time.Now()
	if p.outputOK {
		if _, err := p.cfg.Output.Write(b); err != nil {
			p.outputOK = false // keep draining; the reader is gone
		}
	}
	if p.capC != nil {
		p.capEnd = p.capEnd.Add(time.Since(start))
		p.drainCap.Reset(time.Until(p.capEnd))
	}
	p.ack <- struct{}{}
	if p.exited && p.idleC != nil {
		p.idle.Reset(p.cfg.DrainIdle)
	}
}

// notQuiet says how much longer to wait when the idle timer fires but the
// output has not really been quiet for DrainIdle: output the backend
// still holds, a reader that has a chunk or has not been scheduled since
// the last one (a loaded machine), or one that began its Read less than
// DrainIdle ago. Zero means quiet.
func (p *pump) notQuiet() time.Duration {
	if p.cfg.Pending != nil && p.cfg.Pending() > 0 {
		return p.cfg.DrainIdle
	}
	since := p.inRead.Load()
	if since == 0 {
		return p.cfg.DrainIdle
	}
	if waited := time.Since(time.Unix(0, since)); waited < p.cfg.DrainIdle {
		return p.cfg.DrainIdle - waited
	}
	return 0
}

// event handles a watcher's report.
func (p *pump) event(ev Event) error {
	if ev.Err != nil {
		if ev.Fatal || p.killDone == nil {
			return ev.Err
		}
		return nil
	}
	if ev.Status != nil {
		p.res.StatusKnown = true
		p.res.ExitCode, p.res.Signal = ev.Status.Code, ev.Status.Signal
	}
	if ev.Exited {
		p.exited = true
		p.idle.Reset(p.cfg.DrainIdle)
		p.idleC = p.idle.C
		p.capEnd = time.Now().Add(p.cfg.MaxDrain)
		if p.drainCap == nil {
			p.drainCap = time.NewTimer(p.cfg.MaxDrain)
			p.timers = append(p.timers, p.drainCap)
		} else {
			p.drainCap.Reset(p.cfg.MaxDrain)
		}
		p.capC = p.drainCap.C
	}
	return nil
}

// kill starts the one kill, and stops the deadline and ctx from starting
// another.
func (p *pump) kill() {
	p.deadline, p.done = nil, nil
	done := make(chan int, 1)
	p.killDone = done
	go func() { done <- p.cfg.Kill() }()
}
