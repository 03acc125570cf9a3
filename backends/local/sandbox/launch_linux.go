package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main takes over the process when it is the launcher (launcherEnv set,
// no arguments):
// it confines itself as its spec on descriptor 3 says and execs the
// command, or exits 126 with the reason on stderr. Elsewhere it returns.
func Main() {
	if len(os.Args) != 1 || !slices.Contains(os.Environ(), launcherEnv) {
		return
	}
	// Credentials, no_new_privs, Landlock and seccomp all go with the
	// thread that calls execve; keep every step on one thread.
	runtime.LockOSThread()
	err := launch()
	fmt.Fprintf(os.Stderr, "wsbroker-sandbox: %v\n", err)
	os.Exit(126)
}

// launch confines the process and execs the command; it returns only on
// failure (or, for a probe, after printing the report).
func launch() error {
	f := os.NewFile(3, "spec")
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<30))
	f.Close()
	if err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	// The inherited working directory belongs to the broker's mount
	// namespace, unreachable from this one: the shell gets s.Dir by path.
	if !isUnder(s.Dir, s.Workspace) {
		return fmt.Errorf("working directory %q is not in the workspace", s.Dir)
	}
	var c Confinement
	if err := mounts(s); err != nil {
		return err
	}
	c.Mounts = true
	c.Network = NetworkHost
	if s.Network != NetworkHost {
		if err := loopbackUp(); err != nil {
			return err
		}
		c.Network = NetworkNone
	}
	if err := dropPrivileges(s.UID, s.GID); err != nil {
		return err
	}
	c.User = true
	// As the sandbox's user: a link swapped in meanwhile leads nowhere
	// it could not go anyway.
	if err := os.Chdir(s.Dir); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	c.NoNewPrivs = true
	if len(s.ReadPaths) > 0 {
		if c.LandlockABI, err = restrictPaths(s); err != nil {
			return err
		}
	}
	if s.Seccomp {
		if err := loadSeccomp(); err != nil {
			return err
		}
		c.Seccomp = true
	}
	if s.Probe {
		if err := json.NewEncoder(os.Stdout).Encode(c); err != nil {
			return err
		}
		os.Exit(0)
	}
	return fmt.Errorf("exec %s: %w", s.Path, syscall.Exec(s.Path, s.Args, s.Env))
}

// mounts builds the command's view of the filesystem in its own mount
// namespace: nothing propagates back to the host; /tmp is the
// workspace's own directory and /dev/shm a fresh tmpfs; each hidden
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
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
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

// dropPrivileges leaves root for uid/gid with no supplementary groups.
// Go applies each to every thread of the process.
func dropPrivileges(uid, gid int) error {
	if uid <= 0 || gid <= 0 {
		return fmt.Errorf("refusing uid %d gid %d", uid, gid)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	return nil
}

// isUnder reports whether p is dir or inside it.
func isUnder(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
