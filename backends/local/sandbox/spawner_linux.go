package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/internal/procstart"
)

// Spawner starts one workspace's commands from an OS thread of the
// broker's own that holds the workspace's confinement: its own mount
// namespace (the state directory hidden, /tmp and /dev/shm the
// workspace's), its own network namespace (loopback only), no_new_privs,
// Landlock and the seccomp filter. Namespaces, no_new_privs, Landlock
// domains and seccomp filters are all per thread and inherited by a
// child, so every command the thread forks starts inside them; the child
// drops to the workspace's uid and gid (SysProcAttr.Credential) before
// it execs. Nothing is set up per command: a command costs a fork and an
// exec, as unsandboxed (the launcher this replaced re-executed the
// broker for each command, about 30 ms).
//
// The thread stays locked to its goroutine and is never given back: it
// ends with the goroutine (Close), so nothing else of the broker ever
// runs on it. The Go runtime makes new threads from a clean template
// thread when the asking one is locked, so none inherits the confinement.
type Spawner struct {
	uid, gid  int
	workspace string
	eff       Confinement
	mu        sync.Mutex // orders Start's hand-over against Close
	closed    bool
	reqs      chan spawnReq
}

type spawnReq struct {
	cmd     *exec.Cmd
	entered func()
	done    chan error
}

// ErrClosed is Start's error once Close was called.
var ErrClosed = errors.New("sandbox: spawner closed")

// NewSpawner confines a new thread as s says and returns the spawner
// that starts commands from it, with what held. A layer the kernel lacks
// (Landlock) is left out and reported; any other failure is an error.
func NewSpawner(s Spec) (*Spawner, error) {
	if s.UID <= 0 || s.GID <= 0 {
		return nil, fmt.Errorf("sandbox: refusing uid %d gid %d", s.UID, s.GID)
	}
	sp := &Spawner{uid: s.UID, gid: s.GID, workspace: s.Workspace, reqs: make(chan spawnReq)}
	ready := make(chan error, 1)
	go sp.serve(s, ready, nil)
	if err := <-ready; err != nil {
		return nil, err
	}
	return sp, nil
}

// Confinement is what holds for the spawner's commands.
func (sp *Spawner) Confinement() Confinement { return sp.eff }

// Start starts cmd (Path, Args, Env, Dir as a path inside the workspace,
// Stdout...) from the confined thread, as the workspace's uid and gid
// with no supplementary groups. cmd must not use
// SysProcAttr.UseCgroupFD: clone3 is refused under the filter; the
// cgroup entry goes through descriptors (cgroups.Group.PrepareEntry).
// entered, when not nil, runs once cmd has started, before the next start
// (procstart.StartThen).
func (sp *Spawner) Start(cmd *exec.Cmd, entered func()) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// The working directory is taken by path, in the thread's view,
	// after the uid is dropped: a link swapped in leads nowhere the
	// workspace's uid could not go.
	if !isUnder(cmd.Dir, sp.workspace) {
		return fmt.Errorf("sandbox: working directory %q is not in the workspace", cmd.Dir)
	}
	if cmd.SysProcAttr.UseCgroupFD {
		return errors.New("sandbox: a clone into a cgroup needs clone3, which the filter refuses")
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(sp.uid), Gid: uint32(sp.gid), Groups: []uint32{}}
	done := make(chan error, 1)
	sp.mu.Lock()
	if sp.closed {
		sp.mu.Unlock()
		return ErrClosed
	}
	sp.reqs <- spawnReq{cmd: cmd, entered: entered, done: done}
	sp.mu.Unlock()
	return <-done
}

// Close ends the thread once it has started the commands handed to it.
// Commands already started keep running, in the namespaces they hold.
func (sp *Spawner) Close() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.closed {
		sp.closed = true
		close(sp.reqs)
	}
}

// serve confines the calling goroutine's thread and starts commands on
// it until Close. moved, when not nil, is closed once it runs off the
// main thread.
func (sp *Spawner) serve(s Spec, ready chan<- error, moved chan<- struct{}) {
	// Never unlocked: the thread exits with this goroutine.
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread cannot exit: it would stay, confined and
		// wedged, and /proc/self shows its namespaces to the whole
		// broker. Another goroutine tries again. This one keeps the main
		// thread until that one runs, so that it runs elsewhere: a locked
		// thread runs nothing else. Handed over unlocked, with one P the
		// main thread took the new goroutine up again, without end.
		again := make(chan struct{})
		go sp.serve(s, ready, again)
		<-again
		runtime.UnlockOSThread()
		return
	}
	if moved != nil {
		close(moved)
	}
	eff, err := confineThread(s)
	sp.eff = eff
	ready <- err
	if err != nil {
		return
	}
	for r := range sp.reqs {
		r.done <- procstart.StartThen(r.cmd, r.entered)
	}
}

// confineThread applies s to the calling thread, layer by layer, and
// says what held.
func confineThread(s Spec) (Confinement, error) {
	var c Confinement
	flags := unix.CLONE_FS | unix.CLONE_NEWNS
	if s.Network != NetworkHost {
		flags |= unix.CLONE_NEWNET
	}
	if err := unix.Unshare(flags); err != nil {
		return c, fmt.Errorf("sandbox: unshare: %w", err)
	}
	if err := mounts(s); err != nil {
		return c, err
	}
	c.Mounts = true
	c.Network = NetworkHost
	if s.Network != NetworkHost {
		if err := loopbackUp(); err != nil {
			return c, err
		}
		c.Network = NetworkNone
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return c, fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	c.NoNewPrivs = true
	c.User = true // each child's Credential, see Start
	if len(s.ReadPaths) > 0 {
		abi, err := restrictPaths(s)
		if err != nil {
			return c, err
		}
		c.LandlockABI = abi
	}
	if s.Seccomp {
		if err := loadSeccomp(); err != nil {
			return c, err
		}
		c.Seccomp = true
	}
	return c, nil
}
