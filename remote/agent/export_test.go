package agent

import "time"

// PauseOutputRelays makes every output relay wait d between reading a
// chunk and sending it, until the returned function is called.
func PauseOutputRelays(d time.Duration) (restore func()) {
	relayPause = func() { time.Sleep(d) }
	return func() { relayPause = func() {} }
}
