//go:build linux

package killtree

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes the calling process the reaper of every orphan
// among its descendants (PR_SET_CHILD_SUBREAPER): a grandchild whose parent
// exits, a setsid or double-forked daemon, one that cleared its
// environment, all stay in the caller's subtree, where KillSubtree finds
// them.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// Descendants lists the live (non-zombie) processes below the calling
// process, by their parent links in /proc.
func Descendants() ([]int, error) {
	kids, err := childrenMap()
	if err != nil {
		return nil, err
	}
	return below(kids, os.Getpid()), nil
}

// below walks kids from root, breadth first.
func below(kids map[int][]int, root int) []int {
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range kids[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// childrenMap reads every process's parent from /proc; zombies are left
// out (they cannot be killed, only reaped).
func childrenMap() (map[int][]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	kids := map[int][]int{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			kids[ppid] = append(kids[ppid], pid)
		}
	}
	return kids, nil
}

// parentOf reads a live process's parent from /proc/<pid>/stat ("pid
// (comm) state ppid ...", comm parsed around as in readStat).
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) == 0 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// KillSubtree ends every descendant of the calling process, which must be
// a subreaper (BecomeSubreaper) so that none can leave the subtree: SIGTERM
// to all, up to grace for them to exit, then SIGKILL rounds, rescanning
// until none is left. reap is called between rounds to collect the
// zombies (the caller is their parent); it must not block. It returns how
// many distinct processes it signalled.
//
// Each process is pinned with a pidfd and found again among the
// descendants before it is signalled, so a pid reused by a process outside
// the subtree is never hit.
func KillSubtree(grace time.Duration, reap func()) (int, error) {
	self := os.Getpid()
	signalled := map[int]bool{}
	// send signals every descendant found by one scan of /proc and returns
	// how many there were.
	send := func(sig syscall.Signal) (int, error) {
		kids, err := childrenMap()
		if err != nil {
			return 0, err
		}
		pids := below(kids, self)
		inTree := make(map[int]bool, len(pids)+1)
		inTree[self] = true
		for _, pid := range pids {
			inTree[pid] = true
		}
		for _, pid := range pids {
			if signalPinned(pid, sig, inTree) {
				signalled[pid] = true
			}
		}
		return len(pids), nil
	}
	n, err := send(syscall.SIGTERM)
	if err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(grace); n > 0 && time.Now().Before(deadline); {
		time.Sleep(pollInterval)
		reap()
		if n, err = countDescendants(); err != nil {
			return len(signalled), err
		}
	}
	for round := 0; n > 0; round++ {
		if round == maxKillRounds {
			return len(signalled), errors.New("killtree: processes still appear after " + strconv.Itoa(round) + " kill rounds")
		}
		if _, err = send(syscall.SIGKILL); err != nil {
			return len(signalled), err
		}
		time.Sleep(pollInterval / 2)
		reap()
		if n, err = countDescendants(); err != nil {
			return len(signalled), err
		}
	}
	return len(signalled), nil
}

func countDescendants() (int, error) {
	pids, err := Descendants()
	return len(pids), err
}

// signalPinned sends sig to pid through a pidfd, once the pinned
// process's parent is seen to be in the subtree (inTree, from the same
// scan): a pid reused by a process outside it is never hit. Where pidfds
// are refused (an engine's seccomp profile may not know pidfd_open), the
// check and a plain kill follow each other.
func signalPinned(pid int, sig syscall.Signal, inTree map[int]bool) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil && errors.Is(err, syscall.ESRCH) {
		return false
	}
	if ppid, ok := parentOf(pid); !ok || !inTree[ppid] {
		if err == nil {
			unix.Close(fd)
		}
		return false
	}
	if err != nil {
		return syscall.Kill(pid, sig) == nil
	}
	defer unix.Close(fd)
	return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}
