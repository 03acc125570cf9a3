package local

import (
	"errors"
	"fmt"

	"github.com/wsbroker/wsbroker/backends/local/cgroups"
)

// Default workspace limits, as the docker backend's: a Config whose
// limits leave memoryBytes or pids at 0 gets these; Unlimited turns one
// off (logged at start).
const (
	DefaultMemoryBytes = 2 << 30
	DefaultPids        = 4096
	// Unlimited, as limits.memoryBytes or limits.pids, gives workspaces
	// no such limit by default.
	Unlimited = -1
)

// DefaultShmBytes bounds a sandboxed workspace's /dev/shm, a tmpfs whose
// pages stay after the commands that wrote them end; with a memory limit
// it is at most half of it, and its pages count against that limit
// (they are charged to the cgroup of the command that wrote them, which
// is inside the workspace's). Without one, each workspace may keep this
// much of the host's memory.
const DefaultShmBytes = 64 << 20

// shmBytes is the size of /dev/shm for a workspace with this memory limit
// (0: none).
func shmBytes(memory int64) int64 {
	if memory > 0 {
		return min(DefaultShmBytes, memory/2)
	}
	return DefaultShmBytes
}

// defaultLimits fills the zero memory and pids of l with the defaults.
func defaultLimits(l cgroups.Limits) cgroups.Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	return l
}

// withoutUnlimited is l with Unlimited fields as 0 (no limit), the way
// cgroups and a workspace's saved limits say it.
func withoutUnlimited(l cgroups.Limits) cgroups.Limits {
	if l.MemoryBytes == Unlimited {
		l.MemoryBytes = 0
	}
	if l.Pids == Unlimited {
		l.Pids = 0
	}
	return l
}

// openLimits settles the workspaces' default limits once cgroups are
// decided: Unlimited becomes none, with a warning; the defaults (set
// says which limits the operator configured) are dropped with a warning
// where there are no cgroups to hold them, so that creates still work
// there (limits the operator set are refused at create instead).
func (b *Backend) openLimits(set cgroups.Limits) {
	l := b.cfg.Limits.Limits
	if l.MemoryBytes == Unlimited {
		b.logger.Warn("workspaces have no memory limit (local.limits.memoryBytes: -1): one workspace may take all the host's memory")
	}
	if l.Pids == Unlimited {
		b.logger.Warn("workspaces have no pids limit (local.limits.pids: -1): one workspace's fork bomb may take every process slot of the host")
	}
	l = withoutUnlimited(l)
	if b.cg == nil && (set.MemoryBytes == 0 && l.MemoryBytes > 0 || set.Pids == 0 && l.Pids > 0) {
		b.logger.Warn("workspaces have no memory or pids limit: the default limits need cgroups, which this broker cannot use",
			"memoryBytes", l.MemoryBytes, "pids", l.Pids)
		if set.MemoryBytes == 0 {
			l.MemoryBytes = 0
		}
		if set.Pids == 0 {
			l.Pids = 0
		}
	}
	b.cfg.Limits.Limits = l
}

// withinConfigured refuses requested limits above the configured ones
// (c, after openLimits: 0 is none): a create may ask for less, never more.
func withinConfigured(req, c Limits) error {
	var errs []error
	above := func(name string, asked, most int64) {
		if most > 0 && asked > most {
			errs = append(errs, fmt.Errorf("limits.%s %d is above the broker's limit of %d", name, asked, most))
		}
	}
	above("memoryBytes", req.MemoryBytes, c.MemoryBytes)
	above("pids", req.Pids, c.Pids)
	above("diskBytes", req.DiskBytes, c.DiskBytes)
	if c.CPU > 0 && req.CPU > c.CPU {
		errs = append(errs, fmt.Errorf("limits.cpu %g is above the broker's limit of %g", req.CPU, c.CPU))
	}
	return errors.Join(errs...)
}
