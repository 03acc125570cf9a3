package sandbox

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM. Rule by rule (docs/security.md):
//   - ptrace, process_vm_readv/writev: no reading or steering another
//     process's memory (the uid already keeps other workspaces and the
//     broker out; this keeps debuggers out altogether).
//   - mount, umount2, pivot_root and the new mount API (open_tree,
//     move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr): the
//     command's view of the filesystem is fixed.
//   - unshare, setns: no new namespaces (user namespaces are the
//     kernel's widest attack surface for an unprivileged user).
//   - bpf, perf_event_open, userfaultfd: kernel attack surface no agent
//     command needs.
//   - kexec_load, kexec_file_load, reboot, init_module, finit_module,
//     delete_module, swapon, swapoff, acct, quotactl, iopl, ioperm:
//     machine administration.
//   - keyctl, add_key, request_key: the kernel keyring is shared by uid.
//   - open_by_handle_at: opens files by handle, past any path check.
//   - io_uring_setup, io_uring_enter, io_uring_register: a second way
//     into most of the kernel's calls, past this filter, and a source of
//     kernel bugs (Docker's default profile denies them too).
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev",
	"mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"bpf", "perf_event_open", "userfaultfd",
	"kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module",
	"swapon", "swapoff", "acct", "quotactl", "iopl", "ioperm",
	"keyctl", "add_key", "request_key",
	"open_by_handle_at",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// namespaceFlags are clone's flags that make new namespaces.
const namespaceFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// seccompPolicy allows everything but deniedSyscalls and a clone that
// makes a namespace. clone3 passes its flags in memory a filter cannot
// read, so it answers ENOSYS, and the C library falls back to clone.
func seccompPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deniedSyscalls},
			{
				Action: seccomp.ActionErrno,
				NamesWithCondtions: []seccomp.NameWithConditions{{
					Name:       "clone",
					Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}},
				}},
			},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// loadSeccomp installs the filter on the calling thread, which is the one
// that execs the command.
func loadSeccomp() error {
	if err := seccomp.LoadFilter(seccomp.Filter{Policy: seccompPolicy()}); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
