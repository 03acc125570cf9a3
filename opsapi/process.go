package opsapi

// Process is one process running in a workspace, typically a background
// child that a finished command left behind (pi's semantics allow that).
type Process struct {
	PID int `json:"pid"`
	// Command is the process's command line, arguments joined by spaces.
	Command string `json:"command"`
}
