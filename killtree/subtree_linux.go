//go:build linux

package killtree

import (
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
func Descendants() ([]int, error) { return DescendantsOf(os.Getpid()) }

// DescendantsOf lists the live (non-zombie) processes below pid, breadth
// first, by their parent links in /proc: unlike a group or a marker,
// these catch a child that left the group and cleared its environment,
// as long as the processes between it and pid live.
func DescendantsOf(pid int) ([]int, error) {
	kids, err := childrenMap()
	if err != nil {
		return nil, err
	}
	return below(kids, pid), nil
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

// childrenMap maps each live process's parent to it; zombies are left
// out (they cannot be killed, only reaped).
func childrenMap() (map[int][]int, error) {
	ps, err := procs()
	if err != nil {
		return nil, err
	}
	kids := map[int][]int{}
	for _, p := range ps {
		if !p.zombie {
			kids[p.ppid] = append(kids[p.ppid], p.pid)
		}
	}
	return kids, nil
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
		pids, err := DescendantsOf(self)
		if err != nil {
			return 0, err
		}
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
	if st, ok := readStat(pid); !ok || st.zombie || !inTree[st.ppid] {
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
