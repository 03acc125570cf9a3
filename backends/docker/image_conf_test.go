package docker_test

import (
	"testing"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceImageServer runs the shared suite with the image's
// OpenSSH sftp-server in place of the broker's own (the default when the
// broker's binary is there), so both servers' paths stay covered.
func TestConformanceImageServer(t *testing.T) {
	b := newBackend(t, func(c *docker.Config) { c.SFTPServer = docker.SFTPImage })
	backendtest.Run(t, backendtest.Options{Confined: false, NoStdin: imageServerNoStdio, NoTTY: imageServerNoTTY, New: func(t *testing.T) opsapi.Workspace {
		return create(t, b, nil)
	}})
}

// imageServerNoStdio: with no binary injected there is no in-box agent, and commands go through the engine's exec fallback.
const imageServerNoStdio = "no in-box agent (no binary injected): commands go through the engine's exec fallback, which cannot carry stdin"

// imageServerNoTTY: the fallback runs commands on pipes, never on a terminal.
const imageServerNoTTY = "no in-box agent (no binary injected): the engine's exec fallback has no terminals"
