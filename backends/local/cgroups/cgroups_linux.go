//go:build linux

package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	cgv3 "github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/killtree"
)

// v1Controllers are the v1 hierarchies a group is created in, in order
// of preference for listing its processes: freezer first because the kill
// needs it, pids because it counts every task.
var v1Controllers = []cgroup1.Name{cgroup1.Freezer, cgroup1.Pids, cgroup1.Memory, cgroup1.Cpu}

// v2Controllers are the unified controllers limits need.
var v2Controllers = []string{"cpu", "memory", "pids"}

// cpuPeriod is the CFS period quotas are expressed in (100 ms).
const cpuPeriod = 100000

// pollInterval is how often a kill checks whether a group has emptied.
const pollInterval = 10 * time.Millisecond

// maxKillRounds bounds the kill-and-rescan loop: each round kills every
// process found, so only a group forking faster than it is listed needs
// more than a few.
const maxKillRounds = 50

// freezeWait bounds the wait for a freezer to report FROZEN: a task in
// uninterruptible sleep can hold it in FREEZING, and the kill goes on
// without it rather than hang.
const freezeWait = time.Second

// Base is the base group under which a backend's workspace and command
// groups live.
type Base struct {
	mode    Mode
	v2Mount string
	v1Mount string
	base    string          // group path relative to the mount (v2) or to each hierarchy (v1), starts with "/"
	v1      []cgroup1.Name  // v1 hierarchies present
	ctrls   map[string]bool // controllers limits can use ("memory", "pids", "cpu")
	memsw   bool            // swap is accounted: v1 memsw or v2 memory.swap.max exists
	hasKill bool            // v2 cgroup.kill exists (Linux 5.14+)
}

// Open detects the hierarchy, creates the base group cfg.Name and
// checks that groups can be created and processes placed in them. It
// returns an error wrapping ErrUnavailable when they cannot.
func Open(cfg Config) (*Base, error) {
	if cfg.Name == "" || strings.ContainsAny(cfg.Name, "/\x00") || cfg.Name == "." || cfg.Name == ".." {
		return nil, fmt.Errorf("cgroups: invalid cgroup name %q", cfg.Name)
	}
	if cfg.V1Mount == "" {
		cfg.V1Mount = "/sys/fs/cgroup"
	}
	mode := cfg.Mode
	hostMode := cgv3.Mode()
	if mode == Auto {
		switch hostMode {
		case cgv3.Unified:
			mode = V2
		case cgv3.Legacy, cgv3.Hybrid:
			mode = V1
		default:
			return nil, fmt.Errorf("%w: no cgroup file system mounted", ErrUnavailable)
		}
	}
	if cfg.V2Mount == "" {
		cfg.V2Mount = "/sys/fs/cgroup"
		if hostMode == cgv3.Hybrid {
			cfg.V2Mount = "/sys/fs/cgroup/unified"
		}
	}
	c := &Base{mode: mode, v2Mount: cfg.V2Mount, v1Mount: cfg.V1Mount, ctrls: map[string]bool{}}
	var err error
	switch mode {
	case V2:
		err = c.openV2(cfg.Name)
	case V1:
		err = c.openV1(cfg.Name)
	default:
		err = fmt.Errorf("cgroups: unknown cgroup mode %d", mode)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Mode is the hierarchy in use.
func (c *Base) Mode() Mode { return c.mode }

// Controllers lists the controllers limits are applied with; a limit
// whose controller is missing is not enforced.
func (c *Base) Controllers() []string {
	var out []string
	for k := range c.ctrls {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Path is the base group's directory (the v2 one, or the first v1
// hierarchy's).
func (c *Base) Path() string { return c.dir(c.base) }

func (c *Base) dir(rel string) string {
	if c.mode == V2 {
		return filepath.Join(c.v2Mount, rel)
	}
	return filepath.Join(c.v1Mount, string(c.v1[0]), rel)
}

func (c *Base) openV2(name string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(c.v2Mount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%w: %s is not a cgroup2 mount", ErrUnavailable, c.v2Mount)
	}
	_, own, err := cgv3.ParseCgroupFileUnified("/proc/self/cgroup")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if own == "" {
		own = "/"
	}
	// The base group sits under the broker's own group, which is where a
	// service manager delegates (systemd's Delegate=yes).
	c.base = filepath.Join(own, name)
	ownDir := filepath.Join(c.v2Mount, own)
	avail, _ := os.ReadFile(filepath.Join(ownDir, "cgroup.controllers"))
	for _, f := range strings.Fields(string(avail)) {
		if slices.Contains(v2Controllers, f) {
			c.ctrls[f] = true
		}
	}
	if err := os.MkdirAll(c.Path(), 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if len(c.ctrls) > 0 {
		if err := enableControllers(ownDir, c.Controllers()); err != nil {
			// No internal processes: a non-root group that holds
			// processes cannot hand controllers to children. Move the
			// broker into a leaf beside the base group, then retry.
			if !errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("%w: enabling %v in %s: %v", ErrUnavailable, c.Controllers(), ownDir, err)
			}
			leaf := filepath.Join(ownDir, name+"-broker")
			if err := os.MkdirAll(leaf, 0o755); err != nil {
				return fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
				return fmt.Errorf("%w: moving the broker to %s: %v", ErrUnavailable, leaf, err)
			}
			if err := enableControllers(ownDir, c.Controllers()); err != nil {
				return fmt.Errorf("%w: enabling %v in %s (other processes share the broker's cgroup; delegate one to it): %v",
					ErrUnavailable, c.Controllers(), ownDir, err)
			}
		}
		if err := enableControllers(c.Path(), c.Controllers()); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	_, err = os.Stat(filepath.Join(c.Path(), "cgroup.kill"))
	c.hasKill = err == nil
	_, err = os.Stat(filepath.Join(c.Path(), "memory.swap.max"))
	c.memsw = err == nil
	return nil
}

// enableControllers writes "+ctrl ..." to dir's cgroup.subtree_control.
func enableControllers(dir string, ctrls []string) error {
	var b strings.Builder
	for i, k := range ctrls {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("+" + k)
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(b.String()), 0)
}

func (c *Base) openV1(name string) error {
	for _, n := range v1Controllers {
		if fi, err := os.Stat(filepath.Join(c.v1Mount, string(n))); err == nil && fi.IsDir() {
			c.v1 = append(c.v1, n)
			switch n {
			case cgroup1.Memory, cgroup1.Pids:
				c.ctrls[string(n)] = true
			case cgroup1.Cpu:
				c.ctrls["cpu"] = true
			}
		}
	}
	if len(c.v1) == 0 {
		return fmt.Errorf("%w: no v1 hierarchy of %v under %s", ErrUnavailable, v1Controllers, c.v1Mount)
	}
	_, err := os.Stat(filepath.Join(c.v1Mount, "memory", "memory.memsw.limit_in_bytes"))
	c.memsw = err == nil
	c.base = "/" + name
	if _, err := c.v1Group(c.base, Limits{}); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

func (c *Base) hierarchy() ([]cgroup1.Subsystem, error) {
	var out []cgroup1.Subsystem
	for _, n := range c.v1 {
		root := filepath.Join(c.v1Mount, string(n))
		switch n {
		case cgroup1.Freezer:
			out = append(out, cgroup1.NewFreezer(c.v1Mount))
		case cgroup1.Pids:
			out = append(out, cgroup1.NewPids(c.v1Mount))
		case cgroup1.Memory:
			out = append(out, cgroup1.NewMemory(c.v1Mount))
		case cgroup1.Cpu:
			out = append(out, cgroup1.NewCpu(c.v1Mount))
		default:
			return nil, fmt.Errorf("cgroups: unexpected v1 controller %s at %s", n, root)
		}
	}
	return out, nil
}

func (c *Base) v1Group(rel string, l Limits) (cgroup1.Cgroup, error) {
	return cgroup1.New(cgroup1.StaticPath(rel), c.v1Resources(l), cgroup1.WithHierarchy(c.hierarchy))
}

func (c *Base) v1Resources(l Limits) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if l.MemoryBytes > 0 {
		m := l.MemoryBytes
		r.Memory = &specs.LinuxMemory{Limit: &m}
		if c.memsw {
			r.Memory.Swap = &m
		}
	}
	if l.Pids > 0 {
		p := l.Pids
		r.Pids = &specs.LinuxPids{Limit: &p}
	}
	if l.CPU > 0 {
		q, p := int64(l.CPU*cpuPeriod), uint64(cpuPeriod)
		r.CPU = &specs.LinuxCPU{Quota: &q, Period: &p}
	}
	return r
}

func (c *Base) v2Resources(l Limits) *cgroup2.Resources {
	r := &cgroup2.Resources{}
	if l.MemoryBytes > 0 {
		m := l.MemoryBytes
		r.Memory = &cgroup2.Memory{Max: &m}
		if c.memsw {
			// No swap: a hog is killed at the limit instead of
			// thrashing the host's swap.
			zero := int64(0)
			r.Memory.Swap = &zero
		}
	}
	if l.Pids > 0 {
		r.Pids = &cgroup2.Pids{Max: l.Pids}
	}
	if l.CPU > 0 {
		q, p := int64(l.CPU*cpuPeriod), uint64(cpuPeriod)
		r.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&q, &p)}
	}
	return r
}

// Group is one cgroup under the base: a workspace's, or a command's inside
// it.
type Group struct {
	c      *Base
	rel    string // path relative to the mount / each hierarchy
	limits Limits
}

// Group creates (or opens, when it exists) the group name directly under
// the base, with limits l.
func (c *Base) Group(name string, l Limits) (*Group, error) {
	return c.newGroup(c.base, name, l)
}

// Children lists the names of the groups directly under the base.
func (c *Base) Children() ([]string, error) { return childNames(c.Path()) }

// Remove deletes the base group when it holds nothing (no child group, no
// process); otherwise it leaves it.
func (c *Base) Remove() error {
	if names, _ := c.Children(); len(names) > 0 {
		return nil
	}
	return (&Group{c: c, rel: c.base}).Delete()
}

func (c *Base) newGroup(parent, name string, l Limits) (*Group, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroups: invalid group name %q", name)
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	rel := filepath.Join(parent, name)
	switch c.mode {
	case V2:
		if parent == c.base && len(c.ctrls) > 0 {
			// The base may have been removed with its last group and
			// made anew by MkdirAll below: hand the controllers down
			// again.
			if err := os.MkdirAll(c.Path(), 0o755); err != nil {
				return nil, fmt.Errorf("cgroups: creating cgroup %s: %w", c.base, err)
			}
			if err := enableControllers(c.Path(), c.Controllers()); err != nil {
				return nil, fmt.Errorf("cgroups: enabling controllers in %s: %w", c.base, err)
			}
		}
		res := c.v2Resources(c.available(l))
		if _, err := cgroup2.NewManager(c.v2Mount, rel, res); err != nil {
			return nil, fmt.Errorf("cgroups: creating cgroup %s: %w", rel, err)
		}
		// A workspace's group hands its controllers down, so its
		// commands may get limits of their own; it never holds
		// processes itself (v2 allows processes only in leaves of a
		// controlled subtree). Command groups are those leaves: they
		// must not enable controllers, or a clone into them fails.
		if parent == c.base && len(c.ctrls) > 0 {
			if err := enableControllers(filepath.Join(c.v2Mount, rel), c.Controllers()); err != nil {
				return nil, fmt.Errorf("cgroups: enabling controllers in %s: %w", rel, err)
			}
		}
	case V1:
		if _, err := c.v1Group(rel, c.available(l)); err != nil {
			return nil, fmt.Errorf("cgroups: creating cgroup %s: %w", rel, err)
		}
	}
	return &Group{c: c, rel: rel, limits: l}, nil
}

// available drops the limits whose controller is missing.
func (c *Base) available(l Limits) Limits {
	if !c.ctrls["memory"] {
		l.MemoryBytes = 0
	}
	if !c.ctrls["pids"] {
		l.Pids = 0
	}
	if !c.ctrls["cpu"] {
		l.CPU = 0
	}
	return l
}

// Missing lists the controllers l needs that this host does not offer.
func (c *Base) Missing(l Limits) []string {
	var out []string
	if l.MemoryBytes > 0 && !c.ctrls["memory"] {
		out = append(out, "memory")
	}
	if l.Pids > 0 && !c.ctrls["pids"] {
		out = append(out, "pids")
	}
	if l.CPU > 0 && !c.ctrls["cpu"] {
		out = append(out, "cpu")
	}
	return out
}

// Child creates (or opens) a group inside g.
func (g *Group) Child(name string, l Limits) (*Group, error) {
	return g.c.newGroup(g.rel, name, l)
}

// Children lists the names of g's child groups.
func (g *Group) Children() ([]string, error) { return childNames(g.Path()) }

// ChildGroup opens g's existing child name without changing its limits.
func (g *Group) ChildGroup(name string) *Group {
	return &Group{c: g.c, rel: filepath.Join(g.rel, name)}
}

// Path is the group's directory (v2, or the first v1 hierarchy's).
func (g *Group) Path() string { return g.c.dir(g.rel) }

// Limits are the limits g was created with (those whose controller is
// missing included).
func (g *Group) Limits() Limits { return g.limits }

// MemoryLimit is the effective memory limit of g: its own, or the
// nearest ancestor's below the base; 0 when none.
func (g *Group) MemoryLimit() int64 {
	for rel := g.rel; strings.HasPrefix(rel, g.c.base) && rel != g.c.base; rel = filepath.Dir(rel) {
		var file string
		if g.c.mode == V2 {
			file = filepath.Join(g.c.v2Mount, rel, "memory.max")
		} else {
			file = filepath.Join(g.c.v1Mount, "memory", rel, "memory.limit_in_bytes")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && n < 1<<62 {
			return n
		}
	}
	return 0
}

// MemoryUsage is the memory g's processes use now (v2 memory.current,
// v1 memory.usage_in_bytes), page cache included; 0 where there is no
// memory controller.
func (g *Group) MemoryUsage() int64 {
	file := filepath.Join(g.c.v1Mount, "memory", g.rel, "memory.usage_in_bytes")
	if g.c.mode == V2 {
		file = filepath.Join(g.c.v2Mount, g.rel, "memory.current")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// Prepare arranges for cmd to start inside g before it can run anything,
// so no descendant is ever outside. On v2 the child is cloned straight
// into the group (CLONE_INTO_CGROUP, Linux 5.7+); on v1, which has no such
// clone, cmd is rewritten to run through /bin/sh, which writes its own pid
// into the group's cgroup.procs files with builtins (no fork) and then
// execs the original program. Release the returned Entry once cmd.Start
// has returned (after its Wait, when it started).
func (g *Group) Prepare(cmd *exec.Cmd) (*Entry, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	switch g.c.mode {
	case V2:
		fd, err := unix.Open(g.Path(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("cgroups: opening cgroup %s: %w", g.rel, err)
		}
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
		return &Entry{release: func() { unix.Close(fd) }}, nil
	default:
		path := cmd.Path
		if path == "" {
			return nil, errors.New("cgroups: Prepare needs cmd.Path")
		}
		env := cmd.Env
		if env == nil {
			env = os.Environ()
		}
		kept, deferred := splitLoaderEnv(env)
		procs := make([]string, 0, len(g.c.v1))
		for _, n := range g.c.v1 {
			procs = append(procs, filepath.Join(g.c.v1Mount, string(n), g.rel, "cgroup.procs"))
		}
		writes := make([]string, len(procs))
		for i, p := range procs {
			writes[i] = ">" + shellQuote(p)
		}
		e := &Entry{}
		entered, err := e.enteredPipe(cmd)
		if err != nil {
			return nil, err
		}
		if release, ok, err := prepareBashEntry(cmd, writes, entered, kept, deferred); ok || err != nil {
			if err != nil {
				e.Release()
				return nil, err
			}
			e.release = release
			return e, nil
		}
		args := []string{"/bin/sh", "-c", v1Enter, "wsbroker-cgroup-enter", entered}
		args = append(args, procs...)
		args = append(args, "--")
		args = append(args, deferred...)
		args = append(args, "--", path)
		if len(cmd.Args) > 1 {
			args = append(args, cmd.Args[1:]...)
		}
		cmd.Path, cmd.Args, cmd.Env = "/bin/sh", args, kept
		return e, nil
	}
}

// PrepareEntry is Prepare for a command that starts with fewer rights
// than the caller (a sandbox's uid, under Landlock, and a seccomp filter
// that refuses clone3 and so CLONE_INTO_CGROUP): the group's cgroup.procs
// files (v2: one; v1: one per hierarchy) are opened now, by the caller,
// and the command's bash writes its own pid into them through the
// inherited descriptors with builtins before anything else runs, then
// closes them. The kernel checks a cgroup.procs write against the
// credentials of whoever opened the file (Linux 5.16), and Landlock does
// not check writes to an open file. Where bash's BASH_ENV entry does not
// apply (see prepareBashEntry), /bin/sh does the writes and execs the
// command. Release the returned Entry once cmd.Start has returned (after
// its Wait, when it started).
func (g *Group) PrepareEntry(cmd *exec.Cmd) (*Entry, error) {
	var paths []string
	if g.c.mode == V2 {
		paths = []string{filepath.Join(g.Path(), "cgroup.procs")}
	} else {
		for _, n := range g.c.v1 {
			paths = append(paths, filepath.Join(g.c.v1Mount, string(n), g.rel, "cgroup.procs"))
		}
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	writes := make([]string, 0, len(paths))
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("cgroups: opening %s: %w", p, err)
		}
		writes = append(writes, fmt.Sprintf(">&%d", 3+len(cmd.ExtraFiles)+len(files)))
		files = append(files, f)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, files...)
	e := &Entry{}
	entered, err := e.enteredPipe(cmd)
	if err != nil {
		closeAll()
		return nil, err
	}
	kept, deferred := splitLoaderEnv(env)
	closePipe, ok, err := prepareBashEntry(cmd, writes, entered, kept, deferred)
	if err == nil && ok {
		// bash opens the script's pipe again by /dev/fd/N, as the
		// command's user: a pipe is its maker's, mode 0600.
		if err = cmd.ExtraFiles[len(cmd.ExtraFiles)-1].Chmod(0o644); err != nil {
			closePipe()
		}
	}
	if err != nil {
		closeAll()
		e.Release()
		return nil, err
	}
	if !ok {
		// /bin/sh does the writes, then execs the command.
		args := []string{"/bin/sh", "-c", fdEnter, "wsbroker-cgroup-enter", entered}
		for _, w := range writes {
			args = append(args, strings.TrimPrefix(w, ">&"))
		}
		args = append(append(args, "--"), deferred...)
		args = append(append(args, "--", cmd.Path), cmd.Args[1:]...)
		cmd.Path, cmd.Args, cmd.Env = "/bin/sh", args, kept
		closePipe = func() {}
	}
	e.release = func() {
		closePipe()
		closeAll()
	}
	return e, nil
}

// fdEnter is v1Enter over inherited descriptors: every argument up to
// the first "--" is a descriptor number the shell's pid is written to,
// and that is closed at once; the first argument, before them, is the
// Entry's pipe, closed after them.
const fdEnter = `c=$1; shift
for p; do shift; [ "$p" = -- ] && break; echo "$$" >&"$p" || exit 126; eval "exec $p>&-"; done
eval "exec $c>&-"
for e; do shift; [ "$e" = -- ] && break; export "$e"; done
exec "$@"`

// v1Enter is the shell program of the v1 entry: every argument up to the
// first "--" is a cgroup.procs file that gets the shell's pid (echo and
// redirection are builtins, so nothing forks before every write is done);
// the first argument, before them, is the Entry's pipe, closed after them;
// the KEY=VALUE arguments up to the second "--" are exported (the loader's
// variables, which the shell itself must not start with); what follows is
// exec'ed. A failed write exits 126 before the command runs.
const v1Enter = `c=$1; shift
for p; do shift; [ "$p" = -- ] && break; echo "$$" >"$p" || exit 126; done
eval "exec $c>&-"
for e; do shift; [ "$e" = -- ] && break; export "$e"; done
exec "$@"`

// maxBashEntry bounds the entry script prepareBashEntry writes into a pipe
// before the command starts, well under a pipe's 64 KiB, so the write
// never waits for a reader.
const maxBashEntry = 16 << 10

// prepareBashEntry makes bash enter the group itself, when cmd is `bash
// -c ...` and nothing in env changes how bash starts: the entry script
// (the v1Enter writes, then the deferred exports, then BASH_ENV unset and
// its descriptor closed) comes in through BASH_ENV, which a
// non-interactive bash runs before anything else, from a pipe of this
// call's own (a file could be changed by an earlier command). That saves
// starting /bin/sh first: about 1 ms of a 4.6 ms command here. ok is
// false when the case does not apply, and /bin/sh does the entry.
//
// Bash skips BASH_ENV in POSIX mode (argv[0] "sh", POSIXLY_CORRECT,
// --posix) and privileged mode (-p, a setuid binary), and imports
// functions (BASH_FUNC_*) and options (SHELLOPTS, BASHOPTS) from its
// environment before it; any such sign, or a bash variable in env
// (BASH_*), and the /bin/sh entry is used instead.
//
// writes are the redirections the shell's pid is echoed to, one per
// cgroup.procs file: ">'path'" or ">&N" (an inherited descriptor, closed
// once written). entered is the descriptor of the Entry's pipe, closed
// after them.
func prepareBashEntry(cmd *exec.Cmd, writes []string, entered string, kept, deferred []string) (release func(), ok bool, err error) {
	if filepath.Base(cmd.Path) != "bash" || len(cmd.Args) < 3 || filepath.Base(cmd.Args[0]) != "bash" || cmd.Args[1] != "-c" {
		return nil, false, nil
	}
	if fi, err := os.Stat(cmd.Path); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		return nil, false, nil
	}
	for _, kv := range kept {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "BASH"), k == "ENV", k == "POSIXLY_CORRECT", k == "SHELLOPTS",
			strings.HasPrefix(v, "()"): // a function, as a bash from before Shellshock's fix imports it
			return nil, false, nil
		}
	}
	fd := 3 + len(cmd.ExtraFiles)
	var b strings.Builder
	for _, w := range writes {
		fmt.Fprintf(&b, "echo \"$$\" %s || exit 126\n", w)
		if fd, isFD := strings.CutPrefix(w, ">&"); isFD {
			fmt.Fprintf(&b, "exec %s>&-\n", fd)
		}
	}
	fmt.Fprintf(&b, "exec %s>&-\n", entered)
	for _, kv := range deferred {
		fmt.Fprintf(&b, "export %s\n", shellQuote(kv))
	}
	fmt.Fprintf(&b, "unset BASH_ENV\nexec %d<&-\n", fd)
	if b.Len() > maxBashEntry {
		return nil, false, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, false, fmt.Errorf("cgroups: a pipe for the cgroup entry: %w", err)
	}
	_, err = w.WriteString(b.String())
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, false, fmt.Errorf("cgroups: writing the cgroup entry: %w", err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	cmd.Env = append(kept, fmt.Sprintf("BASH_ENV=/dev/fd/%d", fd))
	return func() { r.Close() }, true, nil
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// splitLoaderEnv takes out of env the variables that make the dynamic
// loader or libc load code or files of the caller's choosing (LD_PRELOAD,
// LD_AUDIT, LD_LIBRARY_PATH, GCONV_PATH, GLIBC_TUNABLES, ...: glibc's
// list of variables unsafe for setuid programs). The v1 entry shell must
// not run with them: a preloaded library's constructor would run, and
// could fork, before the shell has put itself in the group, leaving a
// process outside every limit. The shell exports them again just before
// it execs the command. Entries whose key is no shell name stay: the
// loader reads none of those.
func splitLoaderEnv(env []string) (kept, deferred []string) {
	kept = make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if loaderVar(k) {
			deferred = append(deferred, kv)
		} else {
			kept = append(kept, kv)
		}
	}
	return kept, deferred
}

func loaderVar(k string) bool {
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	if strings.HasPrefix(k, "LD_") || strings.HasPrefix(k, "GLIBC_") {
		return true
	}
	switch k {
	case "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE",
		"NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR":
		return true
	}
	return false
}

// Procs lists the live processes in g and its descendants.
func (g *Group) Procs() ([]int, error) {
	var out []int
	err := filepath.WalkDir(g.Path(), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				if killtree.Alive(pid) {
					out = append(out, pid)
				}
			}
		}
		return nil
	})
	slices.Sort(out)
	return slices.Compact(out), err
}

// Empty reports whether g holds no live process.
func (g *Group) Empty() bool {
	ps, err := g.Procs()
	return err == nil && len(ps) == 0
}

// Exists reports whether g's directory is there.
func (g *Group) Exists() bool {
	_, err := os.Stat(g.Path())
	return err == nil
}

// OOMKills is how many processes in g the kernel's OOM killer has ended
// (v2 memory.events oom_kill, hierarchical; v1 memory.oom_control
// oom_kill, Linux 4.13+). It is 0 where there is no memory controller.
func (g *Group) OOMKills() uint64 {
	var file string
	if g.c.mode == V2 {
		file = filepath.Join(g.c.v2Mount, g.rel, "memory.events")
	} else {
		file = filepath.Join(g.c.v1Mount, "memory", g.rel, "memory.oom_control")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "oom_kill" {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Signal sends sig to every process in g, with g frozen while the list is
// read and signalled so that none forks or exits (and has its pid reused)
// in between. It returns the pids signalled.
func (g *Group) Signal(sig syscall.Signal) ([]int, error) {
	thaw := g.freeze()
	defer thaw()
	pids, err := g.Procs()
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
	return pids, err
}

// Kill ends every process in g and its descendants with SIGKILL, repeating
// until g is empty (cgroup.kill on v2; freeze, signal each, thaw on v1 or
// old kernels). It returns the number of distinct processes killed.
func (g *Group) Kill() (int, error) {
	seen := map[int]bool{}
	for range maxKillRounds {
		pids, err := g.Procs()
		if err != nil {
			return len(seen), err
		}
		if len(pids) == 0 {
			return len(seen), nil
		}
		for _, p := range pids {
			seen[p] = true
		}
		if g.c.mode == V2 && g.c.hasKill {
			if err := os.WriteFile(filepath.Join(g.Path(), "cgroup.kill"), []byte("1"), 0); err != nil {
				return len(seen), fmt.Errorf("cgroups: cgroup.kill %s: %w", g.rel, err)
			}
		} else {
			killed, _ := g.Signal(syscall.SIGKILL)
			for _, p := range killed {
				seen[p] = true
			}
		}
		for i := 0; i < 100 && !g.Empty(); i++ {
			time.Sleep(pollInterval)
		}
	}
	if pids, _ := g.Procs(); len(pids) > 0 {
		return len(seen), fmt.Errorf("cgroups: %d processes left in %s after %d kill rounds", len(pids), g.rel, maxKillRounds)
	}
	return len(seen), nil
}

// KillAll is the whole kill of a command: SIGTERM to process group pgid
// (when > 0) and to every process in g, up to grace for g to empty, then
// SIGKILL to the group and Kill of g. killed counts the distinct processes
// found in g or the group.
func (g *Group) KillAll(pgid int, grace time.Duration) (killed int, err error) {
	seen := map[int]bool{}
	if pgid > 0 {
		pids, _ := killtree.GroupPids(pgid)
		for _, p := range pids {
			seen[p] = true
		}
		_ = killtree.SignalGroup(pgid, syscall.SIGTERM)
	}
	termed, _ := g.Signal(syscall.SIGTERM)
	for _, p := range termed {
		seen[p] = true
	}
	for end := time.Now().Add(grace); time.Now().Before(end) && !(g.Empty() && (pgid <= 0 || killtree.GroupEmpty(pgid))); {
		time.Sleep(pollInterval)
	}
	if pgid > 0 {
		_ = killtree.SignalGroup(pgid, syscall.SIGKILL)
	}
	// The survivors are counted by pid, so one both signalled above and
	// killed here counts once.
	before, _ := g.Procs()
	for _, p := range before {
		seen[p] = true
	}
	_, err = g.Kill()
	return len(seen), err
}

// freeze stops every task in g (v1 freezer.state or v2 cgroup.freeze) and
// returns the function that thaws it. Without a freezer it does nothing.
func (g *Group) freeze() (thaw func()) {
	var file, frozen, thawed string
	switch {
	case g.c.mode == V2:
		file, frozen, thawed = filepath.Join(g.c.v2Mount, g.rel, "cgroup.freeze"), "1", "0"
	case slices.Contains(g.c.v1, cgroup1.Freezer):
		file, frozen, thawed = filepath.Join(g.c.v1Mount, "freezer", g.rel, "freezer.state"), "FROZEN", "THAWED"
	default:
		return func() {}
	}
	if err := os.WriteFile(file, []byte(frozen), 0); err != nil {
		return func() {}
	}
	thaw = func() { _ = os.WriteFile(file, []byte(thawed), 0) }
	for end := time.Now().Add(freezeWait); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if g.isFrozen() {
			break
		}
	}
	return thaw
}

func (g *Group) isFrozen() bool {
	if g.c.mode == V2 {
		b, err := os.ReadFile(filepath.Join(g.c.v2Mount, g.rel, "cgroup.events"))
		return err == nil && bytes.Contains(b, []byte("frozen 1"))
	}
	b, err := os.ReadFile(filepath.Join(g.c.v1Mount, "freezer", g.rel, "freezer.state"))
	return err == nil && strings.TrimSpace(string(b)) == "FROZEN"
}

// Delete kills everything in g, then removes g and its descendants,
// deepest first, in every hierarchy. A group already gone is not an
// error.
func (g *Group) Delete() error {
	if !g.Exists() {
		return nil
	}
	_, kerr := g.Kill()
	var dirs []string
	roots := []string{filepath.Join(g.c.v2Mount, g.rel)}
	if g.c.mode == V1 {
		roots = roots[:0]
		for _, n := range g.c.v1 {
			roots = append(roots, filepath.Join(g.c.v1Mount, string(n), g.rel))
		}
	}
	for _, r := range roots {
		_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	// Deepest first: a parent can only go once its children have.
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	if kerr != nil {
		errs = append(errs, kerr)
	}
	for _, d := range dirs {
		var err error
		// An rmdir right after the last task left can see EBUSY for a
		// moment while the kernel finishes tearing it down.
		for i := 0; i < 50; i++ {
			if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(pollInterval)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("cgroups: removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

func childNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
