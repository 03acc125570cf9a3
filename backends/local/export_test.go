package local

import (
	"os/exec"

	"github.com/wsbroker/wsbroker/backends/local/sandbox"
)

// HoldStarts makes every command start wait until the returned release
// is called (once), and reports on started each start that began
// waiting. It undoes itself with the returned restore.
func HoldStarts() (started <-chan struct{}, release, restore func()) {
	orig := startWith
	begun := make(chan struct{}, 16)
	gate := make(chan struct{})
	startWith = func(sp *sandbox.Spawner, cmd *exec.Cmd) error {
		begun <- struct{}{}
		<-gate
		return orig(sp, cmd)
	}
	return begun, func() { close(gate) }, func() { startWith = orig }
}
