package agent

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/internal/procstart"
)

// Reapers are kept and reused. A reaper is the agent's own binary, and
// starting a Go program here costs more than the command it serves
// (about 30 ms of the 45 ms a `true` took). Reuse is safe because a
// reaper takes its next job only once its subtree is empty: nothing of
// the previous command is left below it to be mistaken for the next
// one's. One that still has background processes stays busy with them.
//
// The agent talks to a reaper over a control socket at the reaper's fd 3:
// messages of a 4-byte length and a JSON ctlMsg; a job carries the
// command's stdout, stderr and status pipes as SCM_RIGHTS, and its stdin
// pipe fourth when the job has one (reapJob.Stdin). A job on a terminal
// (reapJob.TTY) has its slave as stdout, stderr and stdin. The reaper takes the
// messages in the order sent, so a kill or signal sent right after a job
// reaches that job. It answers on the status pipe (relayStatus), ending
// with "idle" when it can take another job.

// maxIdleReapers is how many idle reapers the agent keeps.
const maxIdleReapers = 2

// ctlMsg is one message to a reaper: a job, a kill of a job, or a
// signal for a job's processes.
type ctlMsg struct {
	Job    *reapJob `json:"job,omitempty"`
	Kill   uint64   `json:"kill,omitempty"`
	Signal *sigMsg  `json:"signal,omitempty"`
}

// sigMsg asks for signal Sig (1 to MaxSignal) to go to every process of
// job ID's subtree.
type sigMsg struct {
	ID  uint64 `json:"id"`
	Sig int    `json:"sig"`
}

// reapJob is what a reaper is told to run.
type reapJob struct {
	ID   uint64   `json:"id"`
	Argv []string `json:"argv"`
	// Env is the command's whole environment.
	Env     []string `json:"env"`
	Cwd     string   `json:"cwd"`
	GraceMS int64    `json:"graceMs"`
	// Stdin says a fourth descriptor, the command's stdin, comes with
	// the job; without it the command's stdin is the reaper's, /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// TTY says stdin is a terminal's slave, which the command gets as
	// its controlling terminal in a session of its own.
	TTY bool `json:"tty,omitempty"`
}

// maxCtlMsg bounds a control message in the reaper: a command larger
// than the request header limit never reaches it.
const maxCtlMsg = 4 << 20

// reaper is a started reaper process.
type reaper struct {
	proc *os.Process

	mu     sync.Mutex // serialises messages
	ctl    *os.File   // the agent's end of the control socket
	nextID uint64
}

// reaperPool holds the idle reapers.
type reaperPool struct {
	mu        sync.Mutex
	idle      []*reaper
	refilling bool
}

// startJob hands job and the command's stdout, stderr, status and (with
// job.Stdin) stdin pipes to an idle reaper, or to a fresh one when none
// is idle or the idle one has died (killed with the workspace's
// processes, say). It returns the reaper and the job's id.
func (s *Server) startJob(job reapJob, files ...*os.File) (*reaper, uint64, error) {
	defer func() { go s.refillReapers() }()
	for {
		r := s.takeIdle()
		if r == nil {
			break
		}
		if id, err := r.run(job, files...); err == nil {
			return r, id, nil
		}
		r.discard()
	}
	r, err := s.startReaperProc()
	if err != nil {
		return nil, 0, err
	}
	id, err := r.run(job, files...)
	if err != nil {
		r.discard()
		return nil, 0, err
	}
	return r, id, nil
}

func (s *Server) takeIdle() *reaper {
	p := &s.reapers
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		return nil
	}
	r := p.idle[len(p.idle)-1]
	p.idle = p.idle[:len(p.idle)-1]
	return r
}

// reuse takes back a reaper that said it is idle.
func (s *Server) reuse(r *reaper) {
	p := &s.reapers
	p.mu.Lock()
	keep := len(p.idle) < maxIdleReapers
	if keep {
		p.idle = append(p.idle, r)
	}
	p.mu.Unlock()
	if !keep {
		r.discard()
	}
}

// refillReapers starts a reaper when none is idle and none is starting,
// so the next command does not wait for one.
func (s *Server) refillReapers() {
	p := &s.reapers
	p.mu.Lock()
	if len(p.idle) > 0 || p.refilling {
		p.mu.Unlock()
		return
	}
	p.refilling = true
	p.mu.Unlock()
	r, err := s.startReaperProc()
	p.mu.Lock()
	p.refilling = false
	p.mu.Unlock()
	if err != nil {
		s.log().Warn("starting a reaper", "err", err)
		return
	}
	s.reuse(r)
}

// startReaperProc starts a reaper with the child's end of a control
// socket as its fd 3 (Reap).
func (s *Server) startReaperProc() (*reaper, error) {
	// The agent's end must not leak into other children: hold ForkLock
	// until it is close-on-exec (socketpair's SOCK_CLOEXEC is Linux's).
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("reaper control socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "reaper-ctl"), os.NewFile(uintptr(fds[1]), "reaper-ctl")
	defer theirs.Close()
	cmd := exec.Command(s.self(), ReapMode)
	cmd.ExtraFiles = []*os.File{theirs}
	if err := procstart.Start(cmd); err != nil {
		mine.Close()
		return nil, fmt.Errorf("starting a reaper: %w", err)
	}
	// reapChildren collects it when it ends.
	return &reaper{proc: cmd.Process, ctl: mine}, nil
}

// run sends the reaper a job with its streams and returns the job's id.
func (r *reaper) run(job reapJob, files ...*os.File) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	job.ID = r.nextID
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	err := r.send(ctlMsg{Job: &job}, unix.UnixRights(fds...))
	runtime.KeepAlive(files)
	return job.ID, err
}

// kill asks the reaper to end the subtree of job id; it answers with a
// "killed" status line. A kill for a job already done is ignored.
func (r *reaper) kill(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.send(ctlMsg{Kill: id}, nil)
}

// signal asks the reaper to send sig to every process of job id's
// subtree. One for a job already done is ignored; one that cannot be
// delivered is dropped.
func (r *reaper) signal(id uint64, sig int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.send(ctlMsg{Signal: &sigMsg{ID: id, Sig: sig}}, nil)
}

// send writes one message; the caller holds r.mu. The rights ride on
// the length.
func (r *reaper) send(m ctlMsg, rights []byte) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	hdr := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if err := unix.Sendmsg(int(r.ctl.Fd()), hdr, rights, nil, 0); err != nil {
		return fmt.Errorf("to a reaper: %w", err)
	}
	if _, err := r.ctl.Write(body); err != nil {
		return fmt.Errorf("to a reaper: %w", err)
	}
	return nil
}

// discard ends a reaper that will get no job: without its control socket
// it exits.
func (r *reaper) discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctl.Close()
	_ = r.proc.Release()
}
