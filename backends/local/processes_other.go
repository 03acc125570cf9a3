//go:build !linux

package local

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// killPids needs pidfds (Linux) to pin each target while it is known to
// be the workspace's; signalling a bare pid could hit one reused since.
// Elsewhere the workspace's processes cannot even be listed (no /proc),
// so this is reached only with an empty mine.
func killPids(op string, pids, mine []int, grace time.Duration) (int, error) {
	for _, p := range pids {
		if !slices.Contains(mine, p) {
			return 0, opsapi.E(op, fmt.Sprint(p), opsapi.ErrNotExist, errors.New("no such process in the workspace"))
		}
	}
	return 0, opsapi.E(op, "", nil, fmt.Errorf("killing single processes: %w", errors.ErrUnsupported))
}

// shellWatch needs pidfds (Linux): elsewhere the shell never counts as
// running.
type shellWatch struct{}

func watchShell(int) shellWatch  { return shellWatch{} }
func (shellWatch) running() bool { return false }
func (shellWatch) close()        {}
