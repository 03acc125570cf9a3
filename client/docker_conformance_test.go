package client_test

import (
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/client/overhttp"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceDockerOverHTTP runs the conformance suite, the
// background process cases included, against the docker backend (the
// local engine, one container per case) seen through the broker and this
// client. One broker serves every case: with the container as the
// boundary there is no confinement case to keep apart. The backend runs
// as serve does with the agent binary beside it (make build): commands
// and files go through the in-box agent, which carries stdin, signals and
// terminals (package docker's tests cover the engine's exec fallback).
// Through the agent, a DELETE cancels a running command and closes the
// agent's connection at once, which the in-process suite never does:
// the Destroy-mid-exec case here is the regression test for an Exec that
// hung for 30 s waiting for the answer to its kill.
func TestConformanceDockerOverHTTP(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.KillGrace = 500 * time.Millisecond
	cfg.AgentBinary = testutil.AgentBinary(t)
	overhttp.Run(t, overhttp.Options{Backend: func(t *testing.T) (opsapi.Backend, error) {
		return docker.New(cfg, testutil.Logger(t))
	}})
}
