// Package adversarial is the suite of hostile commands every backend must
// survive (docs/security.md maps each case to the property it proves).
//
// Run takes a workspace factory, as backendtest does, so one suite runs on
// the local backend in process and through the HTTP broker, on docker and
// on ssh. Every case asserts a clear result, that nothing it started is
// left running (counted inside the workspace by a unique token in the
// processes' command lines), that a canary file outside the workspace is
// untouched, and, for in-process backends, that no goroutine or file
// descriptor leaked. Cases backendtest already covers (SIGTERM ignored,
// setsid'ed grandchild, NUL and invalid UTF-8 bytes through Exec) are not
// repeated.
//
// The tests in this package run it on local (in process, as root, with
// cgroup limits), on local through the real broker over loopback HTTP, on
// docker and on ssh, and SIGKILL a real broker binary mid-command to check
// that its restart kills the leftovers.
package adversarial
