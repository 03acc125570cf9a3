package remoteexec

import "time"

// KillScript is the script a Runner's kill runs first.
const KillScript = killScript

// SetKillScriptSlack sets how long the kill script may run past its grace,
// and returns how to put it back.
func SetKillScriptSlack(d time.Duration) (restore func()) {
	old := killScriptSlack
	killScriptSlack = d
	return func() { killScriptSlack = old }
}
