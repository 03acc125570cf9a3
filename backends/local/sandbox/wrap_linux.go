package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// Wrap rewrites cmd (Path, Args, Env, Dir and SysProcAttr already set) to
// start through the launcher at exe, in new mount and, for NetworkNone,
// network namespaces. keepEnv stays in the launcher's own environment
// (the markers by which killtree finds a command's processes); everything
// else of cmd.Env reaches only the command. Call release once cmd has
// started or failed to.
func Wrap(cmd *exec.Cmd, exe string, s Spec, keepEnv []string) (release func(), err error) {
	s.Path, s.Args, s.Env = cmd.Path, cmd.Args, cmd.Env
	f, err := specFile(s)
	if err != nil {
		return nil, err
	}
	cmd.Path, cmd.Args = exe, []string{Arg0}
	cmd.Env = append([]string{launcherEnv}, keepEnv...)
	cmd.ExtraFiles = append([]*os.File{f}, cmd.ExtraFiles...)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNS
	if s.Network != NetworkHost {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNET
	}
	return func() { f.Close() }, nil
}

// specFile is s as JSON in a sealed memfd, read from the start by the
// launcher; a pipe could not take a large environment before the start.
func specFile(s Spec) (*os.File, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	fd, err := unix.MemfdCreate("wsbroker-sandbox-spec", unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("sandbox: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "wsbroker-sandbox-spec")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: writing the spec: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: sealing the spec: %w", err)
	}
	return f, nil
}
