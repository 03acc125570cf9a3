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
// The backend runs with serve's defaults when no agent binary is beside
// it, so commands go through the engine's exec fallback and files use the
// workspace image's own sftp-server (package docker's tests cover the
// agent): stdin and terminals, which need the agent, skip.
func TestConformanceDockerOverHTTP(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.KillGrace = 500 * time.Millisecond
	overhttp.Run(t, overhttp.Options{
		Backend: func(t *testing.T) (opsapi.Backend, error) { return docker.New(cfg, testutil.Logger(t)) },
		NoStdin: noAgent, NoTTY: noAgent,
		NoBackground: "TestBackgroundDockerOverHTTP runs them through the in-box agent",
	})
}

const noAgent = "no agent binary is injected: the engine's exec fallback carries no stdin and has no terminals"

// TestBackgroundDockerOverHTTP runs the background process cases on
// docker through the in-box agent, as serve does with the agent binary
// beside it (make build).
func TestBackgroundDockerOverHTTP(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.KillGrace = 500 * time.Millisecond
	cfg.SFTPServerBinary = testutil.AgentBinary(t)
	overhttp.RunBackground(t, overhttp.Options{Backend: func(t *testing.T) (opsapi.Backend, error) {
		return docker.New(cfg, testutil.Logger(t))
	}})
}
