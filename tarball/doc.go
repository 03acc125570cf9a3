// Package tarball moves whole directory trees into and out of a workspace
// as tar streams (optionally gzip or zstd), over the workspace's own
// operations: every file lands through opsapi's WriteFile and every byte
// leaves through Open, so the backend's confinement and the tenant's
// policy hold for each entry as for a single write or read.
//
// Extract refuses, entry by entry and saying why, what could land outside
// the destination or is not a plain file, directory or link: absolute
// names, names with a ".." element, links whose target leaves the
// destination, hard links, devices and fifos. The rest lands. Limits on
// the entries and on the bytes of file content end an extraction that
// exceeds them.
//
// Write walks a directory and streams it as a tar, links kept as links,
// within the same limits.
package tarball
