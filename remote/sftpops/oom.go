package sftpops

import (
	"context"
	"io"
	"strconv"
	"strings"
)

// oomCounters are where a container sees its memory cgroup's OOM kill
// count: cgroup v2, then v1.
var oomCounters = []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"}

// OOMKills reads the OOM kill count of the memory cgroup the server sees
// as its own (a container's or a pod's); -1 when it cannot be read. Read
// before a command and after it, it tells whether the kernel's OOM killer
// struck meanwhile. The file that answered is remembered.
func (f *FS) OOMKills(ctx context.Context) int64 {
	paths := oomCounters
	if p, ok := f.oomPath.Load().(string); ok {
		paths = []string{p}
	}
	for _, p := range paths {
		rc, err := f.Open(ctx, p)
		if err != nil {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(rc, 4096))
		rc.Close()
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					f.oomPath.Store(p)
					return n
				}
			}
		}
	}
	return -1
}
