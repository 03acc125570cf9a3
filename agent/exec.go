package agent

import (
	"bufio"
	"io"
	"net"
	"os"
	"strings"
	"sync"
)

// ReapMode is the argument that makes the agent's binary a reaper.
const ReapMode = "reap"

// execStream is one exec request being served.
type execStream struct {
	st  net.Conn
	wmu sync.Mutex // serialises frames
	r   *reaper    // runs the command as job id
	id  uint64

	mu     sync.Mutex
	exited bool // the command's status was sent
	killed bool // a kill was asked for (and sent to the reaper)
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
	var pipes []*os.File // the parent's ends, closed once started
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil
		}
		pipes = append(pipes, w)
		return r, w
	}
	outR, outW := pipe()
	statR, statW := pipe()
	errR, errW := outR, outW
	if spec.Stderr {
		errR, errW = pipe()
	}
	if outR == nil || statR == nil || errR == nil {
		_ = e.frame(FrameError, []byte("start: no pipes"))
		return
	}
	r, id, err := s.startJob(reapJob{
		Argv:    spec.argv(),
		Env:     append(os.Environ(), spec.Env...),
		Cwd:     spec.Cwd,
		GraceMS: spec.GraceMS,
	}, outW, errW, statW)
	for _, w := range pipes {
		w.Close()
	}
	if err != nil {
		outR.Close()
		statR.Close()
		errR.Close()
		_ = e.frame(FrameError, []byte("start: "+err.Error()))
		return
	}
	e.r, e.id = r, id
	var relays sync.WaitGroup
	relays.Add(2)
	go func() { defer relays.Done(); e.relayOutput(outR, FrameOutput, true) }()
	go func() { defer relays.Done(); e.relayStatus(s, statR) }()
	if spec.Stderr {
		relays.Add(1)
		go func() { defer relays.Done(); e.relayOutput(errR, FrameStderr, false) }()
	}

	// The client's frames: a kill, or the end of the stream.
	fr := NewFrameReader(st)
	for {
		typ, _, err := fr.Read()
		if err != nil {
			break
		}
		if typ == FrameKill {
			e.kill()
		}
	}
	e.mu.Lock()
	orphaned := !e.exited
	e.mu.Unlock()
	if orphaned {
		e.kill()
	}
	// Unblock the relays: the client is gone, output goes nowhere.
	st.Close()
	relays.Wait()
}

// kill asks the reaper to end the command's subtree; it answers with a
// "killed" status line.
func (e *execStream) kill() {
	e.mu.Lock()
	first := !e.killed
	e.killed = true
	e.mu.Unlock()
	if first {
		e.r.kill(e.id)
	}
}

// relayOutput sends the command's output (or its stderr) until every
// holder closed it; eof says to send FrameEOF then.
func (e *execStream) relayOutput(r *os.File, typ byte, eof bool) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if e.frame(typ, buf[:n]) != nil {
				// The client is gone: keep draining so the command is not
				// stopped by a full pipe before its kill.
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
		if err != nil {
			if eof {
				_ = e.frame(FrameEOF, nil)
			}
			return
		}
	}
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
			e.mu.Lock()
			e.exited = true
			e.mu.Unlock()
			_ = e.frame(FrameExit, []byte(arg))
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
	e.mu.Unlock()
	if askedKill && !sawKilled {
		// The reaper had already ended when the kill came: nothing was
		// left to kill.
		_ = e.frame(FrameKilled, []byte("0"))
	}
}
