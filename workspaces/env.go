package workspaces

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
)

// EnvVar is one variable of a workspace's environment: every command of
// the workspace sees it (a request's own env wins over it). A secret's
// value is redacted from everything that leaves the broker, as the
// policy's redaction rules are. Values are never logged or audited and
// never answered; names are.
type EnvVar struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Secret bool   `json:"secret,omitempty"`
}

// Bounds of a workspace's environment.
const (
	MaxEnvVars  = 256
	MaxEnvBytes = 64 << 10
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkEnv refuses an environment no command could be given.
func checkEnv(vars []EnvVar) error {
	invalid := func(format string, a ...any) error {
		return opsapi.E("env", "", opsapi.ErrInvalid, fmt.Errorf(format, a...))
	}
	if len(vars) > MaxEnvVars {
		return invalid("%d environment variables; at most %d", len(vars), MaxEnvVars)
	}
	seen := map[string]bool{}
	size := 0
	for _, v := range vars {
		switch {
		case !envName.MatchString(v.Name):
			return invalid("environment variable name %q is not a shell name", v.Name)
		case strings.HasPrefix(v.Name, "WSBROKER_"):
			return invalid("environment variable %s: the WSBROKER_ prefix is the broker's", v.Name)
		case strings.IndexByte(v.Value, 0) >= 0:
			return invalid("environment variable %s: its value holds a NUL byte", v.Name)
		case seen[v.Name]:
			return invalid("environment variable %s is given twice", v.Name)
		}
		seen[v.Name] = true
		size += len(v.Name) + len(v.Value) + 1
	}
	if size > MaxEnvBytes {
		return invalid("the environment is %d bytes; at most %d", size, MaxEnvBytes)
	}
	return nil
}

// varNames are the names of vars.
func varNames(vars []EnvVar) []string {
	out := make([]string, len(vars))
	for i, v := range vars {
		out[i] = v.Name
	}
	return out
}

// admitEnv checks vars and the tenant's policy on their names.
func (s *Service) admitEnv(pol *policy.Policy, vars []EnvVar) error {
	if err := checkEnv(vars); err != nil {
		return err
	}
	if len(vars) == 0 {
		return nil
	}
	if d := pol.Decide(policy.Call{Op: "env", Env: varNames(vars)}); !d.Allowed {
		return opsapi.E("env", "", opsapi.ErrDenied, fmt.Errorf("%s", d.Message()))
	}
	return nil
}

// SetEnv replaces w's environment (none when vars is empty). Commands
// started from then on see it; running ones keep theirs.
func (s *Service) SetEnv(ctx context.Context, w *Workspace, vars []EnvVar) error {
	if err := s.admitEnv(s.policyOf(w.tenant), vars); err != nil {
		notesFrom(ctx).Deny("env", err.Error())
		return err
	}
	if err := s.envs.set(w.id, vars, len(vars) == 0); err != nil {
		return fmt.Errorf("keeping workspace %s's environment: %w", w.id, err)
	}
	w.setEnv(vars)
	s.logger.Info("workspace environment set", "workspace", w.id, "names", varNames(vars))
	return nil
}

func (w *Workspace) setEnv(vars []EnvVar) {
	vars = append([]EnvVar(nil), vars...)
	w.env.Store(&vars)
}

// Env is w's environment.
func (w *Workspace) Env() []EnvVar {
	if p := w.env.Load(); p != nil {
		return *p
	}
	return nil
}

// commandEnv is what a command's env becomes: the workspace's variables,
// then the request's own (later pairs win).
func (w *Workspace) commandEnv(extra []string) []string {
	vars := w.Env()
	if len(vars) == 0 {
		return extra
	}
	out := make([]string, 0, len(vars)+len(extra))
	for _, v := range vars {
		out = append(out, v.Name+"="+v.Value)
	}
	return append(out, extra...)
}

// redactorOf is what redacts w's outputs: its tenant's policy's rules
// and w's secret values.
func (s *Service) redactorOf(w *Workspace) *policy.Redactor {
	red := s.policyOf(w.tenant).Redactor()
	var names, values []string
	for _, v := range w.Env() {
		if v.Secret {
			names, values = append(names, v.Name), append(values, v.Value)
		}
	}
	if len(values) == 0 {
		return red
	}
	return red.WithLiterals(names, values)
}
