package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/wsbroker/wsbroker/remote/agentbin"
)

// AgentName is the agent's binary (cmd/wsb-agent), looked for beside the
// broker's executable and on PATH when none is configured.
const AgentName = "wsb-agent"

// AgentBinary is the local agent a backend copies into its boxes.
type AgentBinary struct {
	Path string
	// Hash is the hex SHA-256 of its content: a prefix of it names the
	// copy in a box, so a box holds each build once and a new build is
	// copied anew.
	Hash string
}

// FindAgent locates the agent binary (configured, else AgentName beside
// the broker or on PATH; see agentbin.Find) and hashes it.
func FindAgent(configured string) (AgentBinary, error) {
	p, err := agentbin.Find(configured, AgentName)
	if err != nil {
		return AgentBinary{}, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return AgentBinary{}, fmt.Errorf("reading the agent binary: %w", err)
	}
	sum := sha256.Sum256(data)
	return AgentBinary{Path: p, Hash: hex.EncodeToString(sum[:])}, nil
}
