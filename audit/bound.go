package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Bounds on what one record keeps of client-chosen text: a 401 with a
// 64 KiB query, or a 64 KiB X-Request-Id, writes a record of a few KiB.
const (
	// MaxField bounds each string field of a record.
	MaxField = 1024
	// MaxEnvNames bounds the environment variable names kept.
	MaxEnvNames = 64
)

// Bound returns ev with every string field cut to MaxField bytes and the
// env names to MaxEnvNames. A cut value keeps its head and ends with a
// marker naming its full size and its SHA-256, so two different long
// values never read the same.
func Bound(ev Event) Event {
	for _, f := range []*string{&ev.AuditID, &ev.RequestID, &ev.Stage, &ev.Tenant, &ev.SourceIP, &ev.Verb,
		&ev.Route, &ev.Workspace, &ev.Tool, &ev.Operation, &ev.Decision, &ev.Rule, &ev.Reason} {
		*f = BoundField(*f)
	}
	if ev.Args != nil {
		a := *ev.Args // the caller's Args stay as they were
		a.Digest, a.Path, a.Command = BoundField(a.Digest), BoundField(a.Path), BoundField(a.Command)
		if len(a.Env) > 0 {
			n := min(len(a.Env), MaxEnvNames)
			env := make([]string, n, n+1)
			for i := range n {
				env[i] = BoundField(a.Env[i])
			}
			if len(a.Env) > n {
				env = append(env, fmt.Sprintf("…[%d more names]", len(a.Env)-n))
			}
			a.Env = env
		}
		ev.Args = &a
	}
	return ev
}

// BoundField cuts s to MaxField bytes (on a rune boundary), marking the
// cut with the full length and the SHA-256 of the whole value.
func BoundField(s string) string {
	if len(s) <= MaxField {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	marker := fmt.Sprintf("…[cut: %d bytes, sha256:%s]", len(s), hex.EncodeToString(sum[:]))
	n := MaxField - len(marker)
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + marker
}
