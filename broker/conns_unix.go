//go:build unix

package broker

import "syscall"

// defaultMaxConns is DefaultMaxConns, or half the process's descriptor
// limit when that is lower: the other half is for workspaces' files,
// pipes, the audit trail and backends' connections.
func defaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return DefaultMaxConns
	}
	return int(min(uint64(DefaultMaxConns), max(lim.Cur/2, 16)))
}
