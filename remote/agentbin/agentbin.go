package agentbin

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Find locates a static binary to inject: configured, or name beside the
// broker's executable, or on PATH. It must be a statically linked ELF
// file (it runs where no libc of ours is).
func Find(configured, name string) (string, error) {
	candidates := []string{configured}
	if configured == "" {
		candidates = nil
		if exe, err := os.Executable(); err == nil {
			candidates = append(candidates, filepath.Join(filepath.Dir(exe), name))
		}
		if p, err := exec.LookPath(name); err == nil {
			candidates = append(candidates, p)
		}
	}
	var errs []error
	for _, c := range candidates {
		abs, err := filepath.Abs(c)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err == nil {
			err = Check(abs)
		}
		if err == nil {
			return abs, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("%s not found beside the broker or on PATH", name)
	}
	return "", errors.Join(errs...)
}

// Check verifies p is an executable, statically linked ELF file.
func Check(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", p)
		}
	}
	return nil
}
