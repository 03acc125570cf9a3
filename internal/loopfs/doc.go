// Package loopfs gives a directory a filesystem of its own, of a fixed
// size: an ext4 image on a loop device, mounted on the directory.
//
// A workspace on such a filesystem cannot write past its size, whatever
// writes (a tool, a command, a background process the call left behind,
// a file at a path longer than PATH_MAX): the kernel answers ENOSPC inside
// the workspace, and deleting always works. Its use is one statfs away, so
// a quota needs no walk of the tree. Bind shows one directory of such a
// filesystem elsewhere: the local backend binds a workspace's root from it
// and keeps the workspace's /tmp beside it, so both fill the one size.
//
// It needs root, mkfs.ext4 (e2fsprogs), mount and umount (util-linux) and
// loop devices; Probe says whether the host has them. The image is
// allocated whole when it is made (fallocate), so a full host disk fails
// the create, not a write inside the workspace later.
//
// mkfs has no Go library of note, and mount(8) is what sets up a loop
// device with autoclear and tears it down on unmount; both are run as
// programs rather than redone here.
package loopfs
