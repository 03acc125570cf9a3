package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// chanProc is a command running in an SSH session channel. Its session
// slot is given back only once the server has confirmed the channel's
// close: a slot freed earlier could make the next session exceed the
// server's MaxSessions.
type chanProc struct {
	ch      ssh.Channel
	mu      sync.Mutex
	release func()
	exited  chan remoteexec.Status // the exit status, then closed
	done    chan struct{}          // closed when the channel is
	st      remoteexec.Status
	got     bool
}

func newChanProc(ch ssh.Channel, reqs <-chan *ssh.Request, release func()) *chanProc {
	p := &chanProc{ch: ch, release: release, exited: make(chan remoteexec.Status, 1), done: make(chan struct{})}
	go p.serve(reqs)
	return p
}

// setRelease sets how the slot is given back, at once when the channel
// has already closed.
func (p *chanProc) setRelease(release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		release()
	default:
		p.release = release
	}
}

// request asks the server to run line.
func (p *chanProc) request(line string) error {
	ok, err := p.ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{line}))
	if err == nil && !ok {
		err = errors.New("the server refused to run the command")
	}
	return err
}

// exec asks the server to run line, and closes stdin.
func (p *chanProc) exec(line string) error {
	if err := p.request(line); err != nil {
		return err
	}
	// A command that has already ended may have closed the channel: EOF
	// then says nothing about the command.
	_ = p.ch.CloseWrite()
	return nil
}

// serve reads the channel's requests until it closes.
func (p *chanProc) serve(reqs <-chan *ssh.Request) {
	defer func() {
		close(p.exited)
		p.mu.Lock()
		if p.release != nil {
			p.release()
		}
		close(p.done)
		p.mu.Unlock()
	}()
	for req := range reqs {
		switch req.Type {
		case "exit-status":
			var m struct{ Status uint32 }
			if ssh.Unmarshal(req.Payload, &m) == nil && !p.got {
				p.report(remoteexec.Status{Code: int(m.Status)})
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if ssh.Unmarshal(req.Payload, &m) == nil && !p.got {
				p.report(remoteexec.Status{Code: 128 + signalNumber(m.Signal), Signal: "SIG" + m.Signal})
			}
		}
		if req.WantReply {
			_ = req.Reply(false, nil)
		}
	}
}

func (p *chanProc) report(st remoteexec.Status) {
	p.st, p.got = st, true
	p.exited <- st
}

func (p *chanProc) Stdout() io.Reader { return p.ch }
func (p *chanProc) Stderr() io.Reader { return p.ch.Stderr() }

// Exited is remoteexec.Exiter's.
func (p *chanProc) Exited() <-chan remoteexec.Status { return p.exited }

// Close closes the channel; the process itself is not touched.
func (p *chanProc) Close() error { return p.ch.Close() }

// Wait waits for the channel to close and returns the exit status the
// server reported, or an error when it reported none.
func (p *chanProc) Wait() (remoteexec.Status, error) {
	<-p.done
	if !p.got {
		return remoteexec.Status{Code: -1}, errors.New("the session ended without an exit status")
	}
	return p.st, nil
}

// CommandLine is argv as the line the login shell runs. `sh -c SCRIPT
// NAME ARGS...` becomes `set -- ARGS...` and SCRIPT itself: the login
// shell (POSIX) runs the script without starting another sh, one program
// less per command.
func CommandLine(argv []string) string {
	if len(argv) >= 4 && argv[0] == "sh" && argv[1] == "-c" {
		return "set -- " + remoteexec.ShellJoin(argv[4:]) + "\n" + argv[2]
	}
	return remoteexec.ShellJoin(argv)
}

// signalNumber maps an SSH signal name ("TERM") to Linux's number.
func signalNumber(name string) int {
	for n := 1; n < 32; n++ {
		if remoteexec.SignalName(n) == "SIG"+name {
			return n
		}
	}
	return 0
}

// StartSearch starts argv (rgjson.Remote's) in a session of its own, its
// stderr copied to stderr.
func (s *Sessions) StartSearch(ctx context.Context, argv []string, stderr io.Writer) (rgjson.Process, error) {
	p, err := s.start(ctx, argv)
	if err != nil {
		return nil, err
	}
	sp := &search{p: p, copied: make(chan struct{})}
	go func() {
		defer close(sp.copied)
		_, _ = io.Copy(stderr, p.Stderr())
	}()
	return sp, nil
}

// search is ripgrep in a session.
type search struct {
	p      *chanProc
	copied chan struct{} // closed when stderr is copied
}

func (s *search) Stdout() io.Reader { return s.p.Stdout() }
func (s *search) Close()            { s.p.Close() }

// Abandon waits until the closed session is gone, so its slot is free
// when the call returns.
func (s *search) Abandon() {
	_, _ = io.Copy(io.Discard, s.p.Stdout())
	_, _ = s.Wait()
}

func (s *search) Wait() (int, error) {
	st, err := s.p.Wait()
	<-s.copied
	if err != nil {
		return 0, fmt.Errorf("connection lost during the search: %w", err)
	}
	return st.Code, nil
}
