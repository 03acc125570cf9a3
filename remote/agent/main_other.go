//go:build !linux

package agent

import (
	"fmt"
	"os"
)

// Main: the agent runs on Linux only.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "wsb-agent runs on Linux only")
	return 2
}
