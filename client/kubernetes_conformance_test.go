package client_test

import (
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/client/overhttp"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestConformanceKubernetesOverHTTP runs the conformance suite through a
// broker serving the kubernetes backend on the test cluster (pods whose
// every call goes through the in-box agent), with the Go client as the
// workspace.
func TestConformanceKubernetesOverHTTP(t *testing.T) {
	cfg := kubernetes.NewConfig()
	cfg.Kubeconfig = testutil.RequireKube(t)
	cfg.Identity = testutil.BrokerIdentity
	cfg.ImagePullPolicy = "Never"
	cfg.KillGrace = 500 * time.Millisecond
	cfg.AgentBinary = testutil.AgentBinary(t)
	overhttp.Run(t, overhttp.Options{Backend: func(t *testing.T) (opsapi.Backend, error) {
		return kubernetes.New(cfg, testutil.Logger(t))
	}})
}
