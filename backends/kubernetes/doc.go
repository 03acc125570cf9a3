// Package kubernetes is the workspace backend on a Kubernetes cluster:
// one pod per workspace, in a configured namespace, made hardened by
// default (non-root, every capability dropped, no privilege escalation,
// a read-only root filesystem, RuntimeDefault seccomp, no service account
// token, size-limited volumes, and a NetworkPolicy that denies all
// traffic where the cluster enforces one).
//
// Everything a workspace does goes through the in-box agent (package
// agent): the broker copies its static binary into the pod over one
// pods/exec stream (client-go's remotecommand: WebSocket, falling back to
// SPDY), starts it on a second one, and speaks the agent's protocol over
// that stream's stdin and stdout. There is no fallback without the agent.
//
// Every fact needed to serve a workspace is on its pod (labels and
// annotations: the broker's identity, the workspace id, its owner,
// creation time and root), so a broker that restarts, or another with
// the same identity, finds it again (List).
package kubernetes
