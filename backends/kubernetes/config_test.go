package kubernetes_test

import (
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/kubernetes"
)

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mod  func(*kubernetes.Config)
		want string
	}{
		"root user":      {func(c *kubernetes.Config) { c.User = "0:0" }, "other than root"},
		"named user":     {func(c *kubernetes.Config) { c.User = "agent" }, "numeric uid:gid"},
		"namespace":      {func(c *kubernetes.Config) { c.Namespace = "Not_A_Name" }, "not a namespace name"},
		"network":        {func(c *kubernetes.Config) { c.Network = "bridge" }, `network "bridge"`},
		"pull policy":    {func(c *kubernetes.Config) { c.ImagePullPolicy = "Sometimes" }, "imagePullPolicy"},
		"tmpfs > memory": {func(c *kubernetes.Config) { c.TmpfsSize = c.Memory }, "tmpfsSize"},
		"workspace dir":  {func(c *kubernetes.Config) { c.WorkspaceDir = "/proc/x" }, "workspaceDir"},
	} {
		t.Run(name, func(t *testing.T) {
			c := kubernetes.NewConfig()
			c.Identity = "x"
			tc.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
	c := kubernetes.NewConfig()
	c.Identity = "x"
	if err := c.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
