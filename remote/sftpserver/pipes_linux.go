package sftpserver

import (
	"os"

	"golang.org/x/sys/unix"
)

// WidenPipes grows each file that is a pipe to PipeSize bytes. An exec's
// stdio are pipes of 64 KiB, so the server's replies to a large read
// stall on every second 32 KiB packet until the engine's shim has copied
// them on; with room for 32 packets the server writes ahead (8 MiB read
// over a docker exec: ~65 ms against ~90 ms). Files that are not pipes,
// and a refusal (the caller's pipe quota is spent), leave things as they
// were: a narrow pipe is only slower.
func WidenPipes(files ...*os.File) {
	for _, f := range files {
		fi, err := f.Stat()
		if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			continue
		}
		// Control, not Fd: Fd would put the file in blocking mode.
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, PipeSize) })
		}
	}
}
