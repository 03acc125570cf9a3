package docker_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceInjectedServer runs the shared suite with the broker's
// own SFTP server (pkg/sftp's) in place of the image's OpenSSH one.
func TestConformanceInjectedServer(t *testing.T) {
	b := newBackend(t, func(c *docker.Config) { c.SFTPServer = docker.SFTPInject })
	backendtest.Run(t, backendtest.Options{Confined: false, New: func(t *testing.T) opsapi.Workspace {
		return create(t, b, nil)
	}})
}
