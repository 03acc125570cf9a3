package cli

import (
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/wsbroker/wsbroker/backends/local"
)

// TestLocalDiskLimitLoads: diskBytes sits beside the cgroup limits in
// local.limits, as docs/backends.md says.
func TestLocalDiskLimitLoads(t *testing.T) {
	var c local.Config
	if err := yaml.Unmarshal([]byte("limits: {memoryBytes: 1048576, diskBytes: 16777216}\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Limits.MemoryBytes != 1<<20 || c.Limits.DiskBytes != 16<<20 {
		t.Fatalf("limits loaded as %+v", c.Limits)
	}
}
