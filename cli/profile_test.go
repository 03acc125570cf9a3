package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/workspaces"
)

// TestWsCreateProfile: ws create --profile creates the workspace the
// broker's profile describes; an unknown one fails naming it.
func TestWsCreateProfile(t *testing.T) {
	url := startBrokerConfig(t, broker.Config{Tokens: []string{"s3cret"},
		Profiles: map[string]workspaces.Profile{"plain": {Backend: "local"}}})
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}
	out, errs, code := run(env, "", "ws", "create", "--profile", "plain", "--json")
	var info struct{ ID, Backend string }
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Backend != "local" || info.ID == "" {
		t.Fatalf("ws create --profile: %d %q %q", code, out, errs)
	}
	if _, errs, code := run(env, "", "ws", "create", "--profile", "nosuch"); code == 0 || !strings.Contains(errs, `no profile "nosuch" is configured`) {
		t.Fatalf("unknown profile: %d %q", code, errs)
	}
	if _, errs, code := run(env, "", "ws", "create", "--profile", "plain", "--backend", "local"); code == 0 || !strings.Contains(errs, "not both") {
		t.Fatalf("profile and backend: %d %q", code, errs)
	}
}
