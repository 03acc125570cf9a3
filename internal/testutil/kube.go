package testutil

import (
	"os"
	"testing"
)

// KubeconfigEnv names the kubeconfig of the test cluster
// (scripts/kube-cluster.sh up prints it; .ci/run exports it).
const KubeconfigEnv = "WSB_KUBECONFIG"

// RequireKube returns the test cluster's kubeconfig, or skips (fails under
// CI) when there is none.
func RequireKube(t testing.TB) string {
	t.Helper()
	p := os.Getenv(KubeconfigEnv)
	if p == "" {
		SkipOrFail(t, "needs a Kubernetes cluster: set "+KubeconfigEnv+" (scripts/kube-cluster.sh up)")
	}
	if _, err := os.Stat(p); err != nil {
		SkipOrFail(t, "needs a Kubernetes cluster: "+err.Error())
	}
	return p
}
