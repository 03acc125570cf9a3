package agent

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ReapMode is the first argument that makes the agent's binary a reaper.
const ReapMode = "reap"

// execStream is one exec request being served.
type execStream struct {
	st  net.Conn
	wmu sync.Mutex // serialises frames
	cmd *exec.Cmd

	mu     sync.Mutex
	exited bool // the command's status was sent
	killed bool // a kill was asked for
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
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = WriteFrame(st, FrameError, []byte("start: "+err.Error()))
		return
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		_ = WriteFrame(st, FrameError, []byte("start: "+err.Error()))
		return
	}
	cmd := exec.Command(s.self(), ReapMode, strconv.FormatInt(spec.GraceMS, 10), spec.Shell, spec.Cwd, spec.Command)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{statW}
	e := &execStream{st: st, cmd: cmd}
	err = cmd.Start()
	outW.Close()
	statW.Close()
	if err != nil {
		outR.Close()
		statR.Close()
		_ = e.frame(FrameError, []byte("start: "+err.Error()))
		return
	}
	go func() { _ = cmd.Wait() }() // the reaper ends when its subtree is empty

	var relays sync.WaitGroup
	relays.Add(2)
	go func() { defer relays.Done(); e.relayOutput(outR) }()
	go func() { defer relays.Done(); e.relayStatus(statR) }()

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
	outR.Close()
	relays.Wait()
}

// kill asks the reaper to end its subtree; it answers with a "killed"
// status line.
func (e *execStream) kill() {
	e.mu.Lock()
	already := e.killed
	e.killed = true
	e.mu.Unlock()
	if !already {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// relayOutput sends the command's output until every holder closed it.
func (e *execStream) relayOutput(r *os.File) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if e.frame(FrameOutput, buf[:n]) != nil {
				// The client is gone: keep draining so the command is not
				// stopped by a full pipe before its kill.
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
		if err != nil {
			_ = e.frame(FrameEOF, nil)
			return
		}
	}
}

// relayStatus turns the reaper's status lines into frames. A reaper that
// ends without an exit line (killed from outside) reports its own end.
func (e *execStream) relayStatus(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sawKilled := false
	for sc.Scan() {
		kind, arg, _ := strings.Cut(sc.Text(), " ")
		switch kind {
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
