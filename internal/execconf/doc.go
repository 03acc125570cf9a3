// Package execconf is the configuration block every backend that runs
// commands shares: the kill grace, the draining after a command's exit,
// the shell and ripgrep.
//
// # Use
//
// A backend's Config embeds Exec with `yaml:",inline"`, so its keys
// (killGrace, drainIdle, maxDrain, shell, rgPath) stay flat in the
// backend's own section; WithDefaults fills zero fields and Problems adds
// the block's validation errors to the backend's.
package execconf
