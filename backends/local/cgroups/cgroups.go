package cgroups

import (
	"errors"
	"fmt"
)

// Mode says which cgroup hierarchy a Base uses.
type Mode int

// Cgroup modes. Auto asks Open to detect the host's.
const (
	Auto Mode = iota
	V1        // legacy: one hierarchy per controller (also "hybrid" hosts)
	V2        // unified hierarchy
)

func (m Mode) String() string {
	switch m {
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return "auto"
}

// ErrUnavailable is returned by Open where cgroups cannot be used
// (another OS, no cgroup file system, no permission to create groups);
// callers fall back to process groups and markers.
var ErrUnavailable = errors.New("cgroups: unavailable")

// Limits bound a cgroup's resources; a zero field means no limit.
type Limits struct {
	// MemoryBytes is the memory limit (v2 memory.max, v1
	// memory.limit_in_bytes and, where swap is accounted, the memsw limit
	// too, so a hog cannot swap instead of being killed).
	MemoryBytes int64 `json:"memoryBytes,omitempty" yaml:"memoryBytes"`
	// Pids caps the number of tasks (processes and threads): a fork bomb
	// gets EAGAIN at the cap.
	Pids int64 `json:"pids,omitempty" yaml:"pids"`
	// CPU is a quota in cores (1.5 = one and a half cores' time per
	// period).
	CPU float64 `json:"cpu,omitempty" yaml:"cpu"`
}

// Validate rejects negative limits.
func (l Limits) Validate() error {
	var errs []error
	if l.MemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("memoryBytes must not be negative, got %d", l.MemoryBytes))
	} else if l.MemoryBytes > 0 && l.MemoryBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("memoryBytes %d is below 1 MiB: nothing could start", l.MemoryBytes))
	}
	if l.Pids < 0 {
		errs = append(errs, fmt.Errorf("pids must not be negative, got %d", l.Pids))
	}
	if l.CPU < 0 {
		errs = append(errs, fmt.Errorf("cpu must not be negative, got %g", l.CPU))
	}
	return errors.Join(errs...)
}

// Merge returns l with every zero field taken from d.
func (l Limits) Merge(d Limits) Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	if l.CPU == 0 {
		l.CPU = d.CPU
	}
	return l
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// Config says where Open puts its groups.
type Config struct {
	// Name is the base group every group of this user lives under, one
	// path component (e.g. "wsbroker-<hash of the state dir>"), so that
	// a restarted broker finds the groups its predecessor left.
	Name string
	// Mode forces a hierarchy; Auto detects it (v2 on a unified
	// host, v1 on a legacy or hybrid one, whose controllers are bound to
	// v1).
	Mode Mode
	// V2Mount is the unified hierarchy's mount point; default
	// /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host.
	V2Mount string
	// V1Mount is the directory holding the v1 hierarchies; default
	// /sys/fs/cgroup.
	V1Mount string
}
