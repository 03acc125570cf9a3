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

// maxKillRounds bounds the SIGKILL-and-rescan loop for marked processes:
// each round kills everything found, so only a process that forks faster
// than a /proc scan completes needs more than a few.
const maxKillRounds = 50

type procStat struct {
	pid, ppid, pgid int
	zombie          bool
}

// procs lists the processes in /proc with their parent, group and state.
func procs() ([]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]procStat, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		st, ok := readStat(pid)
		if ok {
			out = append(out, st)
		}
	}
	return out, nil
}

// readStat parses /proc/<pid>/stat: "pid (comm) state ppid pgrp ...".
// comm may contain spaces and parentheses, so parsing starts after the
// last ')'.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procStat{}, false
	}
	pgid, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return procStat{}, false
	}
	state := f[0]
	return procStat{pid: pid, ppid: ppid, pgid: pgid, zombie: len(state) > 0 && (state[0] == 'Z' || state[0] == 'X')}, true
}

// GroupMembers counts the live (non-zombie) processes in process group
// pgid.
func GroupMembers(pgid int) (int, error) {
	ps, err := procs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ps {
		if p.pgid == pgid && !p.zombie {
			n++
		}
	}
	return n, nil
}

// GroupMarked reports whether a live member of process group pgid
// carries the environment entry marker. A caller that remembered a group id
// uses it before killing the group, so that an id the kernel has since
// handed to an unrelated group is left alone.
func GroupMarked(pgid int, marker string) (bool, error) {
	ps, err := procs()
	if err != nil {
		return false, err
	}
	m := &markedSet{marker: []byte(marker)}
	for _, p := range ps {
		if p.pgid == pgid && !p.zombie && m.carries(p.pid) {
			return true, nil
		}
	}
	return false, nil
}

// GroupPids lists the live (non-zombie) processes in process group pgid.
func GroupPids(pgid int) ([]int, error) {
	ps, err := procs()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range ps {
		if p.pgid == pgid && !p.zombie {
			out = append(out, p.pid)
		}
	}
	return out, nil
}

// Alive reports whether process pid exists and is not a zombie.
func Alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && !st.zombie
}

// KillMarked ends every process whose environment holds the exact entry
// marker ("KEY=VALUE"): SIGTERM, up to grace for them to exit, then
// SIGKILL, rescanning until none is left. It returns the number of
// distinct processes it signalled. The caller's own process is never
// touched. Processes whose environment cannot be read (another user's,
// when not root) are not found; neither is one that rewrote its
// environment.
func KillMarked(marker string, grace time.Duration) (int, error) {
	if marker == "" {
		return 0, errors.New("killtree: empty marker")
	}
	return KillAll(0, marker, grace)
}

// markedSet is the set of processes found carrying a marker, each pinned
// by a pidfd where the kernel supports it (Linux 5.3+), else by pid.
type markedSet struct {
	marker []byte
	procs  map[int]int // pid -> pidfd, or -1
	ever   map[int]bool
}

func newMarkedSet(marker string) (*markedSet, error) {
	m := &markedSet{marker: []byte(marker), procs: map[int]int{}, ever: map[int]bool{}}
	if err := m.scan(); err != nil {
		return nil, err
	}
	return m, nil
}

// scan adds the marked processes not yet in the set.
func (m *markedSet) scan() error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		if _, ok := m.procs[pid]; ok {
			continue
		}
		if !m.carries(pid) {
			continue
		}
		// Pin, then check again: if the pid was reused between the
		// first check and the pin, the second check sees the new
		// process, so the pidfd kept always refers to a marked one.
		fd, perr := unix.PidfdOpen(pid, 0)
		if perr != nil {
			if errors.Is(perr, syscall.ESRCH) {
				continue
			}
			fd = -1
		}
		if !m.carries(pid) {
			if fd >= 0 {
				unix.Close(fd)
			}
			continue
		}
		m.procs[pid] = fd
	}
	return nil
}

// carries reports whether /proc/<pid>/environ has the marker entry.
func (m *markedSet) carries(pid int) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for len(env) > 0 {
		var entry []byte
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			entry, env = env, nil
		}
		if bytes.Equal(entry, m.marker) {
			return true
		}
	}
	return false
}

// signal sends sig to every live process in the set and returns their
// pids; processes found gone are dropped.
func (m *markedSet) signal(sig syscall.Signal) []int {
	var out []int
	for pid, fd := range m.procs {
		var err error
		if fd >= 0 {
			err = unix.PidfdSendSignal(fd, sig, nil, 0)
		} else {
			err = syscall.Kill(pid, sig)
		}
		if err != nil {
			m.drop(pid)
			continue
		}
		m.ever[pid] = true
		out = append(out, pid)
	}
	return out
}

// empty reports whether every process in the set has exited.
func (m *markedSet) empty() bool {
	for pid, fd := range m.procs {
		if m.exited(pid, fd) {
			m.drop(pid)
		}
	}
	return len(m.procs) == 0
}

func (m *markedSet) exited(pid, fd int) bool {
	if fd >= 0 {
		// A pidfd polls readable once its process has terminated.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return err == nil && n > 0
	}
	st, ok := readStat(pid)
	return !ok || st.zombie
}

func (m *markedSet) drop(pid int) {
	if fd := m.procs[pid]; fd >= 0 {
		unix.Close(fd)
	}
	delete(m.procs, pid)
}

// killUntilGone SIGKILLs the set and rescans until no marked process is
// left (or maxKillRounds), then releases every pidfd. It returns every pid
// ever signalled.
func (m *markedSet) killUntilGone() []int {
	for round := 0; round < maxKillRounds; round++ {
		m.signal(syscall.SIGKILL)
		// Wait briefly for the kills to land, so the rescan does not
		// find the same dying processes again.
		for i := 0; i < 20 && !m.empty(); i++ {
			time.Sleep(pollInterval / 2)
		}
		if err := m.scan(); err != nil || len(m.procs) == 0 {
			break
		}
	}
	for pid := range m.procs {
		m.drop(pid)
	}
	out := make([]int, 0, len(m.ever))
	for pid := range m.ever {
		out = append(out, pid)
	}
	return out
}

// MarkedPids lists the live processes whose environment holds the exact
// entry marker; the caller's own process is never listed.
func MarkedPids(marker string) ([]int, error) {
	if marker == "" {
		return nil, errors.New("killtree: empty marker")
	}
	ps, err := procs()
	if err != nil {
		return nil, err
	}
	m := &markedSet{marker: []byte(marker)}
	self := os.Getpid()
	var out []int
	for _, p := range ps {
		if p.pid != self && !p.zombie && m.carries(p.pid) {
			out = append(out, p.pid)
		}
	}
	return out, nil
}

// Cmdline is process pid's command line, arguments joined by spaces
// ("" when it is gone or a kernel thread).
func Cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return string(bytes.TrimRight(bytes.ReplaceAll(b, []byte{0}, []byte{' '}), " "))
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// CPUTime is the CPU time pids have used, user and system, their
// waited-for children's included (utime, stime, cutime, cstime of
// /proc/<pid>/stat). Processes that are gone count nothing.
func CPUTime(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		// After comm: state is field 3; utime..cstime are fields 14 to 17.
		f := bytes.Fields(b[i+1:])
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(string(v), 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
