package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// DefaultReadPaths are what a toolchain needs: the system's programs and
// libraries, /etc (less its secrets), /proc, /dev and /sys for tools that
// ask about themselves and the machine.
var DefaultReadPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc", "/proc", "/dev", "/sys", "/var/lib/dpkg"}

// etcDenied are the entries of /etc left out of a read list that names
// /etc: password hashes, sudo's rules, host keys and the broker's own
// configuration.
var etcDenied = map[string]bool{
	"shadow": true, "shadow-": true, "gshadow": true, "gshadow-": true,
	"sudoers": true, "sudoers.d": true, "ssh": true, "wsbroker": true,
	"security": true, "credstore": true, "credstore.encrypted": true,
}

// etcPartly are directories of /etc whose entries are granted but for
// those named: TLS clients (node, git, curl, pip) need the public
// certificates and openssl.cnf, never the private keys.
var etcPartly = map[string]map[string]bool{
	"ssl": {"private": true},
}

// LandlockABI is the newest Landlock ABI the kernel offers, 0 for none.
func LandlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// restrictPaths lets the calling thread and its children write only in its workspace, /tmp,
// /dev/shm and the character devices a shell writes to, and read and
// execute only s.ReadPaths. Best effort: the newest ABI the kernel has
// is used, none at all when it has no Landlock. It returns that ABI.
func restrictPaths(s Spec) (int, error) {
	abi := LandlockABI()
	if abi == 0 {
		return 0, nil
	}
	var dirs, files []string
	for _, p := range s.ReadPaths {
		if filepath.Clean(p) == "/etc" {
			d, f := etcEntries()
			dirs, files = append(dirs, d...), append(files, f...)
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			files = append(files, p)
		} else {
			dirs = append(dirs, p)
		}
	}
	rules := []landlock.Rule{
		landlock.RODirs(dirs...).IgnoreIfMissing(),
		landlock.ROFiles(files...).IgnoreIfMissing(),
		landlock.RWDirs(s.Workspace, "/tmp", "/dev/shm").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx").IgnoreIfMissing(),
	}
	// The calling thread alone (go-landlock's RestrictPaths would
	// confine every thread of the broker); no_new_privs is already set.
	// Files only, as RestrictPaths: the network is the namespace's.
	fsOnly := landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS}
	fd, flags, err := fsOnly.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return 0, fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		return 0, nil
	}
	defer unix.Close(fd)
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return 0, fmt.Errorf("landlock: %w", err)
	}
	return min(abi, 7), nil
}

// etcEntries is every entry of /etc but etcDenied's, split by what each
// leads to (Landlock grants directory rights on directories only).
func etcEntries() (dirs, files []string) {
	entries, err := os.ReadDir("/etc")
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		if etcDenied[e.Name()] {
			continue
		}
		p := filepath.Join("/etc", e.Name())
		if deny, ok := etcPartly[e.Name()]; ok {
			d, f := entriesBut(p, deny)
			dirs, files = append(dirs, d...), append(files, f...)
			continue
		}
		if fi, err := os.Stat(p); err != nil {
			continue // a dangling link
		} else if fi.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	return dirs, files
}

// entriesBut is every entry of dir but the denied ones, split as
// etcEntries splits them.
func entriesBut(dir string, denied map[string]bool) (dirs, files []string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if denied[e.Name()] {
			continue
		}
		if fi, err := os.Stat(p); err != nil {
			continue
		} else if fi.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	return dirs, files
}
