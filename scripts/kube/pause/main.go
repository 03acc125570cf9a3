// Command pause is the sandbox ("infra") container of every pod on the test
// cluster: it holds the pod's namespaces and does nothing else. No pause image
// can be pulled on an offline machine, so scripts/kube-cluster.sh builds this
// one (static, CGO_ENABLED=0) and imports it into containerd.
//
// Like the upstream pause it sleeps in pause(2), exits 0 on SIGINT or SIGTERM
// (as PID 1 an unhandled SIGTERM would be ignored and every pod stop would wait
// for SIGKILL), and reaps the zombies it inherits when the pod shares one PID
// namespace.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// The runtime's signal thread wakes this goroutine; every other thread
	// sleeps, so the process costs nothing while it waits, as pause(2) does.
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
