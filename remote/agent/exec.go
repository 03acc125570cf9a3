package agent

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
)

// relayPause runs between an output relay's read and its frame; tests
// make it sleep, as a relay not scheduled on a loaded box would.
var relayPause = func() {}

// ReapMode is the argument that makes the agent's binary a reaper.
const ReapMode = "reap"

// execStream is one exec request being served.
type execStream struct {
	st  net.Conn
	wmu sync.Mutex // serialises frames
	r   *reaper    // runs the command as job id
	id  uint64
	in  *stdinFeed // the command's stdin, when asked for
	tty *os.File   // the terminal's master, when the command has one

	mu     sync.Mutex
	exited bool // the command's status was sent
	killed bool // a kill was asked for (and sent to the reaper)
	// statusDone: relayStatus has ended (the reaper closed the job's
	// status pipe), so the reaper will answer no later kill.
	statusDone bool
	// The exit's frame waits in exitFrame until every relay has sent what
	// the command wrote before it exited (see exitAfterOutput).
	relays    []*relay
	exitFrame []byte
}

// relay is one of the command's output pipes being sent on.
type relay struct {
	f   *os.File
	typ byte // FrameOutput or FrameStderr
	eof bool // send FrameEOF at its end
	tty bool // a terminal's master (see ttyExitWait)
	// done: the pipe has ended; flushed: it was emptied after the exit.
	// Guarded by the stream's mu.
	done, flushed bool
}

func (e *execStream) frame(typ byte, payload []byte) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return WriteFrame(e.st, typ, payload)
}

// serveExec starts spec under a reaper and relays its output and status
// until the client closes the stream. The client closing it before the
// command exited kills the tree: nobody waits for that command anymore.
func (s *Server) serveExec(st net.Conn, spec ExecSpec) {
	e := &execStream{st: st}
	p, err := newExecPipes(spec)
	if err != nil {
		_ = e.frame(FrameError, []byte("start: no pipes"))
		return
	}
	r, id, err := s.startJob(reapJob{
		Argv:    spec.argv(),
		Env:     append(os.Environ(), spec.Env...),
		Cwd:     spec.Cwd,
		GraceMS: spec.GraceMS,
		Stdin:   p.inR != nil,
		TTY:     p.tty,
	}, p.childEnds()...)
	p.closeChildEnds()
	if err != nil {
		p.closeOurEnds()
		_ = e.frame(FrameError, []byte("start: "+err.Error()))
		return
	}
	e.r, e.id = r, id
	e.relays = []*relay{{f: p.outR, typ: FrameOutput, eof: true, tty: p.tty}}
	if p.tty {
		e.tty = p.outR
	} else if spec.Stderr {
		e.relays = append(e.relays, &relay{f: p.errR, typ: FrameStderr})
	}
	var relays sync.WaitGroup
	for _, rl := range e.relays {
		relays.Add(1)
		go func() { defer relays.Done(); e.relayOutput(rl) }()
	}
	relays.Add(1)
	go func() { defer relays.Done(); e.relayStatus(s, p.statR) }()
	if p.inW != nil {
		e.in = newStdinFeed(p.inW, e.frame)
		relays.Add(1)
		go func() { defer relays.Done(); e.in.run() }()
	}

	e.readClientFrames(s)
	e.mu.Lock()
	orphaned := !e.exited
	e.mu.Unlock()
	if orphaned {
		e.kill()
	}
	if e.in != nil {
		e.in.stop()
	}
	// Unblock the relays and the stdin feed's ack: the client is gone,
	// output goes nowhere.
	st.Close()
	relays.Wait()
}

// readClientFrames serves the client's frames until the stream ends or
// the client breaks the protocol. It never waits on the command: stdin is
// queued for the feed's goroutine, within the client's credit.
func (e *execStream) readClientFrames(s *Server) {
	fr := NewFrameReader(e.st)
	for {
		typ, p, err := fr.Read()
		if err != nil {
			return
		}
		if err := e.clientFrame(typ, p); err != nil {
			s.log().Warn("exec stream: the client broke the protocol; ending the stream", "err", err)
			return
		}
	}
}

// clientFrame handles one frame from the client; an error ends the stream.
func (e *execStream) clientFrame(typ byte, p []byte) error {
	switch typ {
	case FrameKill:
		e.kill()
	case FrameSignal:
		// A bad number is refused, not a breach: a signal that cannot be
		// delivered is dropped.
		if sig, ok := parseSignal(p); ok {
			e.r.signal(e.id, sig)
		}
	case FrameStdin:
		if e.in == nil {
			return errors.New("stdin for a command without one")
		}
		return e.in.push(p)
	case FrameStdinEOF:
		if e.in == nil {
			return errors.New("end of stdin for a command without one")
		}
		e.in.end()
	case FrameResize:
		// Dropped when malformed or without a terminal, as a bad signal
		// is; one after the relay closed the master fails harmlessly.
		if size, ok := parseResize(p); ok && e.tty != nil {
			_ = setTTYSize(e.tty, size)
		}
	}
	return nil
}

// parseSignal reads FrameSignal's payload: a decimal from 1 to MaxSignal,
// digits only (no sign, no leading zero).
func parseSignal(p []byte) (int, bool) {
	if len(p) == 0 || len(p) > 2 || p[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= MaxSignal
}

// execPipes are a command's pipes: the child's ends go to the reaper,
// ours stay. inR and inW are nil without stdin; errR and errW are the
// output pipe when stderr is not apart. On a terminal (tty) the slave is
// outW, errW and inR, the master outR and errR, and inW, when stdin is
// asked for, another descriptor of the master.
type execPipes struct {
	outR, outW, errR, errW, statR, statW, inR, inW *os.File
	tty                                            bool
}

func newExecPipes(spec ExecSpec) (*execPipes, error) {
	p := &execPipes{}
	var err error
	if spec.TTY != nil {
		return newTTYPipes(spec)
	}
	pipe := func() (r, w *os.File) {
		if err == nil {
			r, w, err = os.Pipe()
		}
		return r, w
	}
	p.outR, p.outW = pipe()
	p.statR, p.statW = pipe()
	p.errR, p.errW = p.outR, p.outW
	if spec.Stderr {
		p.errR, p.errW = pipe()
	}
	if spec.Stdin {
		p.inR, p.inW = pipe()
	}
	if err != nil {
		p.closeChildEnds()
		p.closeOurEnds()
		return nil, err
	}
	return p, nil
}

// newTTYPipes opens the terminal and the status pipe of a command on a
// terminal.
func newTTYPipes(spec ExecSpec) (*execPipes, error) {
	master, slave, err := openTTY(*spec.TTY)
	if err != nil {
		return nil, err
	}
	p := &execPipes{tty: true, outR: master, errR: master, outW: slave, errW: slave, inR: slave}
	if spec.Stdin {
		p.inW, err = dupTTY(master)
	}
	if err == nil {
		p.statR, p.statW, err = os.Pipe()
	}
	if err != nil {
		p.closeChildEnds()
		p.closeOurEnds()
		return nil, err
	}
	return p, nil
}

// childEnds are the descriptors the reaper gets, in its order: stdout,
// stderr, status and, when asked for, stdin.
func (p *execPipes) childEnds() []*os.File {
	f := []*os.File{p.outW, p.errW, p.statW}
	if p.inR != nil {
		f = append(f, p.inR)
	}
	return f
}

// closeChildEnds drops our copies of the child's ends once the reaper
// has its own: a stream ends when the command's last holder closes it.
func (p *execPipes) closeChildEnds() {
	closeFiles(p.outW, p.errW, p.statW, p.inR)
}

func (p *execPipes) closeOurEnds() {
	closeFiles(p.outR, p.errR, p.statR, p.inW)
}

// closeFiles closes the files that are set; a file listed twice (the
// merged output) is closed once, the second Close failing harmlessly.
func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// kill asks the reaper to end the command's subtree; it answers with a
// "killed" status line. Once the job's status pipe has ended the reaper
// ignores the kill (the job is done, its subtree empty), so the answer is
// "0" from here: the client waits for it (up to half a minute) and a
// cancel in its drain after the exit comes just then.
func (e *execStream) kill() {
	e.mu.Lock()
	first := !e.killed
	e.killed = true
	over := e.statusDone
	e.mu.Unlock()
	switch {
	case !first:
	case over:
		_ = e.frame(FrameKilled, []byte("0"))
	default:
		e.r.kill(e.id)
	}
}

// relayOutput sends one of the command's output pipes until every holder
// closed it. Once the command has exited it also empties the pipe and
// says so (settle), so the exit's frame follows what came before it.
func (e *execStream) relayOutput(rl *relay) {
	r := rl.f
	defer r.Close()
	buf := make([]byte, 32<<10)
	pending := execpump.PipePending(r)
	waited := false // a terminal's relay has waited ttyExitWait
	for {
		n, err := r.Read(buf)
		if n > 0 {
			relayPause()
			if e.frame(rl.typ, buf[:n]) != nil {
				// The client is gone: keep draining so the command is not
				// stopped by a full pipe before its kill.
				_ = r.SetReadDeadline(time.Time{})
				_, _ = io.Copy(io.Discard, r)
				e.settle(rl, true)
				return
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// exitAfterOutput woke us: the command has exited.
			if rl.tty && !waited {
				waited = true
				_ = r.SetReadDeadline(time.Now().Add(ttyExitWait))
				continue
			}
			_ = r.SetReadDeadline(time.Time{})
			if !e.flush(rl, buf, pending) {
				continue // the client is gone; the next read drains
			}
			e.settle(rl, false)
			continue
		}
		if err != nil {
			// A pipe's EOF, or a terminal's EIO: every holder closed it.
			if rl.eof {
				_ = e.frame(FrameEOF, nil)
			}
			e.settle(rl, true)
			return
		}
	}
}

// flush sends what the pipe holds now: with the command exited, that is
// all it wrote before its exit. False when the client is gone.
func (e *execStream) flush(rl *relay, buf []byte, pending func() int) bool {
	if pending == nil {
		return true
	}
	for n := pending(); n > 0; n = pending() {
		m, err := rl.f.Read(buf[:min(n, len(buf))])
		if m > 0 && e.frame(rl.typ, buf[:m]) != nil {
			return false
		}
		if err != nil {
			return true
		}
	}
	return true
}

// exitAfterOutput sends the exit's frame once every relay has sent the
// output before it. Output and status arrive on different pipes; a relay
// may not have been scheduled since the command's last write (a loaded
// box), and a client that drains by silence would lose that output, or a
// program's error message, if the exit overtook it.
func (e *execStream) exitAfterOutput(frame []byte) {
	e.mu.Lock()
	e.exited = true
	e.exitFrame = frame
	var wake []*os.File
	for _, rl := range e.relays {
		if !rl.done {
			wake = append(wake, rl.f)
		}
	}
	ready := e.takeExit()
	e.mu.Unlock()
	if ready != nil {
		_ = e.frame(FrameExit, ready)
		return
	}
	for _, f := range wake {
		_ = f.SetReadDeadline(time.Now()) // wake the relay
	}
}

// settle records that a relay has ended (done) or emptied its pipe after
// the exit, and sends the exit's frame when it was the last one waited
// for.
func (e *execStream) settle(rl *relay, done bool) {
	e.mu.Lock()
	if done {
		rl.done = true
	} else {
		rl.flushed = true
	}
	ready := e.takeExit()
	e.mu.Unlock()
	if ready != nil {
		_ = e.frame(FrameExit, ready)
	}
}

// takeExit returns the exit's frame, once, when one waits and every relay
// has ended or emptied its pipe since; e.mu is held.
func (e *execStream) takeExit() []byte {
	if e.exitFrame == nil {
		return nil
	}
	for _, rl := range e.relays {
		if !rl.done && !rl.flushed {
			return nil
		}
	}
	f := e.exitFrame
	e.exitFrame = nil
	return f
}

// relayStatus turns the reaper's status lines into frames. A reaper that
// ends without an exit line (killed from outside) reports its own end.
func (e *execStream) relayStatus(s *Server, r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sawKilled := false
	for sc.Scan() {
		kind, arg, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "idle":
			// The subtree is empty: the reaper can serve another command.
			s.reuse(e.r)
		case "exit":
			e.exitAfterOutput([]byte(arg))
		case "killed":
			sawKilled = true
			_ = e.frame(FrameKilled, []byte(arg))
		case "nocwd", "notdir", "noperm", "start:":
			e.mu.Lock()
			e.exited = true
			e.mu.Unlock()
			_ = e.frame(FrameError, []byte(strings.TrimSpace(kind+" "+arg)))
		}
	}
	e.mu.Lock()
	askedKill := e.killed
	e.statusDone = true // a kill from now on is kill's to answer
	e.mu.Unlock()
	if askedKill && !sawKilled {
		// The reaper had already ended when the kill came: nothing was
		// left to kill.
		_ = e.frame(FrameKilled, []byte("0"))
	}
}
