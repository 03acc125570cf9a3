package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCpRoundTrip: a local tree goes into a workspace and comes back out
// whole (files, modes, links), as gzip and zstd; a link that leaves the
// tree is refused with a non-zero exit; bad arguments are usage errors.
func TestCpRoundTrip(t *testing.T) {
	url := startBroker(t, "s3cret")
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}
	out, errs, code := run(env, "", "ws", "create")
	if code != 0 {
		t.Fatalf("ws create: %d %q", code, errs)
	}
	id := strings.TrimSpace(out)

	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(src, "bin", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(filepath.Join(src, "README"), []byte("hello\n"), 0o644))
	must(os.Symlink("bin/run.sh", filepath.Join(src, "run")))

	if _, errs, code := run(env, "", "cp", src, id+":proj"); code != 0 || !strings.Contains(errs, "2 files") {
		t.Fatalf("cp up: %d %q", code, errs)
	}
	for _, c := range []string{"gzip", "zstd", "none"} {
		dst := filepath.Join(t.TempDir(), "back")
		if _, errs, code := run(env, "", "cp", "--compression", c, id+":proj", dst); code != 0 {
			t.Fatalf("cp down (%s): %d %q", c, code, errs)
		}
		if b, err := os.ReadFile(filepath.Join(dst, "run")); err != nil || string(b) != "#!/bin/sh\n" {
			t.Errorf("%s: through the link: %q %v", c, b, err)
		}
		if fi, err := os.Stat(filepath.Join(dst, "bin", "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode lost: %v", c, err)
		}
		if target, err := os.Readlink(filepath.Join(dst, "run")); err != nil || target != "bin/run.sh" {
			t.Errorf("%s: link %q %v", c, target, err)
		}
	}

	must(os.Symlink("../../../etc/passwd", filepath.Join(src, "out")))
	if _, errs, code := run(env, "", "cp", src, id+":proj2"); code != 1 || !strings.Contains(errs, "out: link to") {
		t.Errorf("cp of a link out: %d %q", code, errs)
	}
	if _, _, code := run(env, "", "cp", src, filepath.Join(t.TempDir(), "x")); code != exitUsage {
		t.Errorf("cp between two local paths: %d, want a usage error", code)
	}
}
