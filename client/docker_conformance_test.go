package client_test

import (
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/backendtest/overhttp"
	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceDockerOverHTTP runs the conformance suite against the
// docker backend (the local engine, one container per case) seen through
// the broker and this client. One broker serves every case: with the
// container as the boundary there is no confinement case to keep apart.
// The backend runs as serve does with the agent binary beside it (make
// build): commands and files go through the in-box agent, which carries
// stdin, signals and terminals (package docker's tests cover the
// fallback through the image's own sftp-server).
func TestConformanceDockerOverHTTP(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.KillGrace = 500 * time.Millisecond
	cfg.SFTPServerBinary = testutil.AgentBinary(t)
	overhttp.Run(t, overhttp.Options{Backend: func(t *testing.T) (opsapi.Backend, error) {
		return docker.New(cfg, testutil.Logger(t))
	}})
}
