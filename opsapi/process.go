package opsapi

import "context"

// Process is one process running in a workspace, typically a background
// child that a finished command left behind (pi's semantics allow that).
type Process struct {
	PID int `json:"pid"`
	// Command is the process's command line, arguments joined by spaces.
	Command string `json:"command"`
}

// ProcessManager is an optional ability of a Workspace: list and kill the
// processes its commands started and left running. Deleting the workspace
// kills them too; this is for doing it earlier.
type ProcessManager interface {
	// Processes lists every live process that belongs to the workspace,
	// including those of commands still running.
	Processes(ctx context.Context) ([]Process, error)
	// KillProcesses ends the given processes (SIGTERM, a grace, SIGKILL),
	// or every process of the workspace when pids is empty, and returns
	// how many it killed. A pid that does not belong to the workspace is
	// ErrNotExist and nothing is killed.
	KillProcesses(ctx context.Context, pids []int) (int, error)
}
