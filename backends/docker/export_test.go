package docker

import "errors"

// NoLoopDevices makes the backends built until restore act as on a host
// that cannot give workspace volumes filesystems of their own.
func NoLoopDevices() (restore func()) {
	orig := probeDisks
	probeDisks = func(string) error { return errors.New("no loop devices (test)") }
	return func() { probeDisks = orig }
}

// AgentDir is the workspace's run directory on the host, "" for none.
func (w *Workspace) AgentDir() string { return w.box.agentDir }
