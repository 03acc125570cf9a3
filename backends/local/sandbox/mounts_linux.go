package sandbox

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// mounts builds the commands' view of the filesystem in the thread's own
// mount namespace: nothing propagates back to the host; /tmp is the
// workspace's own directory and /dev/shm a fresh tmpfs of s.ShmBytes; each hidden
// directory (the state directory) is an empty read-only tmpfs with the
// workspace mounted back at its path.
func mounts(s Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	// Opened before anything is hidden: a bind from a descriptor works
	// where the path no longer leads.
	ws, err := unix.Open(s.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the workspace: %w", err)
	}
	defer unix.Close(ws)
	if s.Tmp != "" {
		if err := bindFD(s.Tmp, "/tmp"); err != nil {
			return err
		}
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		size := s.ShmBytes
		if size <= 0 {
			size = 64 << 20
		}
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=1777,size=%d", size)); err != nil {
			return fmt.Errorf("mounting /dev/shm: %w", err)
		}
	}
	for _, h := range s.Hide {
		// Under /tmp (tests' state directories), the path is made
		// again inside the workspace's own /tmp.
		if err := os.MkdirAll(h, 0o755); err != nil {
			return fmt.Errorf("hiding %s: %w", h, err)
		}
		if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=16k"); err != nil {
			return fmt.Errorf("hiding %s: %w", h, err)
		}
	}
	if err := os.MkdirAll(s.Workspace, 0o755); err != nil {
		return fmt.Errorf("mounting the workspace: %w", err)
	}
	if err := unix.Mount(fdPath(ws), s.Workspace, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mounting the workspace: %w", err)
	}
	for _, h := range s.Hide {
		if err := unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("hiding %s: %w", h, err)
		}
	}
	return nil
}

// bindFD binds the directory src onto dst through a descriptor.
func bindFD(src, dst string) error {
	fd, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("mounting %s on %s: %w", src, dst, err)
	}
	defer unix.Close(fd)
	if err := unix.Mount(fdPath(fd), dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", src, dst, err)
	}
	return nil
}

func fdPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// loopbackUp brings up lo in the fresh network namespace, so that servers
// and clients inside the command still meet on 127.0.0.1.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return nil
}

// isUnder reports whether p is dir or inside it.
func isUnder(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
