package policy

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Guard wraps a backend workspace and asks the policy before every
// operation reaches it. It implements every opsapi interface; an ability
// the wrapped workspace lacks answers ErrUnavailable, and Unwrap gives
// the broker the inner workspace to test abilities on. Tool rules are not
// checked here (a tool uses Stat, Open... under the hood); the broker
// checks them once per call. Path, command, timeout and env rules are.
type Guard struct {
	inner  opsapi.Workspace
	policy func() *Policy
	// onDeny hears every denial, for the audit log.
	onDeny func(ctx context.Context, op string, d Decision)
}

// Every interface the wrapper forwards. The broker's test walks opsapi's
// source and fails when one is added here and not forwarded.
var (
	_ opsapi.Operations     = (*Guard)(nil)
	_ opsapi.EditOperations = (*Guard)(nil)
	_ opsapi.Resolver       = (*Guard)(nil)
	_ opsapi.Destroyer      = (*Guard)(nil)
)

// NewGuard wraps ws; current returns the policy in force at each call (so
// a reloaded policy applies at once), nil meaning allow all. onDeny may be
// nil.
func NewGuard(ws opsapi.Workspace, current func() *Policy, onDeny func(ctx context.Context, op string, d Decision)) *Guard {
	if onDeny == nil {
		onDeny = func(context.Context, string, Decision) {}
	}
	return &Guard{inner: ws, policy: current, onDeny: onDeny}
}

// Unwrap returns the wrapped workspace.
func (g *Guard) Unwrap() opsapi.Workspace { return g.inner }

// Root is the inner workspace's root.
func (g *Guard) Root() string { return g.inner.Root() }

func (g *Guard) check(ctx context.Context, op, p string, c Call) (Decision, error) {
	c.Root = g.inner.Root()
	d := g.policy().Decide(c)
	if d.Allowed {
		return d, nil
	}
	g.onDeny(ctx, op, d)
	return d, opsapi.E(op, p, opsapi.ErrDenied, errors.New(d.Message()))
}

// checkReal also checks the path a symbolic link leads to, when the inner
// workspace can resolve it: "src/link -> ../.env" is read as ".env".
func (g *Guard) checkReal(ctx context.Context, op, p string, write bool) error {
	c := Call{Read: []string{p}}
	if write {
		c = Call{Write: []string{p}}
	}
	if _, err := g.check(ctx, op, p, c); err != nil {
		return err
	}
	rs, ok := g.inner.(opsapi.Resolver)
	if pol := g.policy(); !ok || !pol.hasPathRules(write) {
		return nil // nothing a link could get around: spare the lookup
	}
	target := p
	rp, err := rs.RealPath(ctx, target)
	if err != nil && write {
		// A new file: its directory may be a link.
		dir, base := path.Split(opsapi.Resolve(g.inner.Root(), p))
		if rp, err = rs.RealPath(ctx, dir); err == nil {
			rp = path.Join(rp, base)
		}
	}
	if err != nil || rp == opsapi.Resolve(g.inner.Root(), p) {
		return nil // nothing else to check; the operation reports a missing path itself
	}
	if write {
		c = Call{Write: []string{rp}}
	} else {
		c = Call{Read: []string{rp}}
	}
	_, err = g.check(ctx, op, p, c)
	return err
}

func unavailable(op, p string) error {
	return opsapi.E(op, p, opsapi.ErrUnavailable, errors.New("the workspace's backend does not serve this operation"))
}

// Open checks the read rules, following links.
func (g *Guard) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	rd, ok := g.inner.(opsapi.ReadOperations)
	if !ok {
		return nil, unavailable("open", p)
	}
	if err := g.checkReal(ctx, "open", p, false); err != nil {
		return nil, err
	}
	return rd.Open(ctx, p)
}

// Access checks the read or write rules for mode.
func (g *Guard) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	rd, ok := g.inner.(opsapi.ReadOperations)
	if !ok {
		return unavailable("access", p)
	}
	if mode&opsapi.AccessRead != 0 {
		if err := g.checkReal(ctx, "access", p, false); err != nil {
			return err
		}
	}
	if mode&opsapi.AccessWrite != 0 {
		if err := g.checkReal(ctx, "access", p, true); err != nil {
			return err
		}
	}
	return rd.Access(ctx, p, mode)
}

// WriteFile checks the write rules, following links.
func (g *Guard) WriteFile(ctx context.Context, p string, r io.Reader) error {
	wo, ok := g.inner.(opsapi.WriteOperations)
	if !ok {
		return unavailable("write", p)
	}
	if err := g.checkReal(ctx, "write", p, true); err != nil {
		return err
	}
	return wo.WriteFile(ctx, p, r)
}

// Mkdir checks the write rules.
func (g *Guard) Mkdir(ctx context.Context, p string) error {
	wo, ok := g.inner.(opsapi.WriteOperations)
	if !ok {
		return unavailable("mkdir", p)
	}
	if _, err := g.check(ctx, "mkdir", p, Call{Write: []string{p}}); err != nil {
		return err
	}
	return wo.Mkdir(ctx, p)
}

// Exec checks the command, env and timeout rules and applies MaxTimeout
// to a command that has none.
func (g *Guard) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	bo, ok := g.inner.(opsapi.BashOperations)
	if !ok {
		return opsapi.ExecResult{}, unavailable("exec", "")
	}
	d, err := g.check(ctx, "exec", req.Cwd, Call{Command: req.Command, HasCommand: true, Timeout: req.Timeout, Env: EnvNames(req.Env)})
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	req.Timeout = d.Timeout
	return bo.Exec(ctx, req)
}

// EnvNames returns the names of KEY=VALUE pairs; values never reach a
// decision or an audit record.
func EnvNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		names = append(names, k)
	}
	return names
}

// statter is what every Stat-bearing interface shares.
type statter interface {
	Stat(ctx context.Context, path string) (opsapi.FileInfo, error)
}

// Stat checks the read rules: size and type are part of what a file says.
func (g *Guard) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	st, ok := g.inner.(statter)
	if !ok {
		return opsapi.FileInfo{}, unavailable("stat", p)
	}
	if _, err := g.check(ctx, "stat", p, Call{Read: []string{p}}); err != nil {
		return opsapi.FileInfo{}, err
	}
	return st.Stat(ctx, p)
}

// ReadDir checks the directory and drops entries the read rules hide.
func (g *Guard) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	ls, ok := g.inner.(opsapi.LsOperations)
	if !ok {
		return nil, unavailable("readdir", p)
	}
	if _, err := g.check(ctx, "readdir", p, Call{Read: []string{p}}); err != nil {
		return nil, err
	}
	entries, err := ls.ReadDir(ctx, p)
	if err != nil {
		return nil, err
	}
	pol, root, dir := g.policy(), g.inner.Root(), opsapi.Resolve(g.inner.Root(), p)
	out := entries[:0]
	for _, e := range entries {
		if pol.ReadAllowed(root, path.Join(dir, e.Name)) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Search checks the searched path and drops lines of files the read rules
// hide, so "grep SECRET ." cannot read a denied .env.
func (g *Guard) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	gr, ok := g.inner.(opsapi.GrepOperations)
	if !ok {
		return opsapi.SearchResult{}, unavailable("search", req.Path)
	}
	if _, err := g.check(ctx, "search", req.Path, Call{Read: []string{req.Path}}); err != nil {
		return opsapi.SearchResult{}, err
	}
	res, err := gr.Search(ctx, req)
	if err != nil {
		return res, err
	}
	pol, root := g.policy(), g.inner.Root()
	base := opsapi.Resolve(root, req.Path)
	single := false // a single file searched: Path is its base name
	if fi, err := gr.Stat(ctx, req.Path); err == nil && !fi.IsDir() {
		single = true
	}
	out := res.Lines[:0]
	for _, l := range res.Lines {
		full := path.Join(base, l.Path)
		if single {
			full = base
		}
		if pol.ReadAllowed(root, full) {
			out = append(out, l)
		}
	}
	res.Lines = out
	return res, nil
}

// Glob checks the searched directory and drops hidden matches.
func (g *Guard) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	fo, ok := g.inner.(opsapi.FindOperations)
	if !ok {
		return opsapi.GlobResult{}, unavailable("glob", req.Dir)
	}
	if _, err := g.check(ctx, "glob", req.Dir, Call{Read: []string{req.Dir}}); err != nil {
		return opsapi.GlobResult{}, err
	}
	res, err := fo.Glob(ctx, req)
	if err != nil {
		return res, err
	}
	pol, root := g.policy(), g.inner.Root()
	base := opsapi.Resolve(root, req.Dir)
	out := res.Paths[:0]
	for _, p := range res.Paths {
		if pol.ReadAllowed(root, path.Join(base, p)) {
			out = append(out, p)
		}
	}
	res.Paths = out
	return res, nil
}

// RealPath checks the read rules on the path asked about.
func (g *Guard) RealPath(ctx context.Context, p string) (string, error) {
	rs, ok := g.inner.(opsapi.Resolver)
	if !ok {
		return "", unavailable("realpath", p)
	}
	if _, err := g.check(ctx, "realpath", p, Call{Read: []string{p}}); err != nil {
		return "", err
	}
	return rs.RealPath(ctx, p)
}

// Destroy passes through: removing a workspace is the tenant's right.
func (g *Guard) Destroy(ctx context.Context) error {
	if d, ok := g.inner.(opsapi.Destroyer); ok {
		return d.Destroy(ctx)
	}
	return nil
}

// Processes passes through: listing what the workspace's own commands left
// running reveals nothing the tenant could not see with bash.
func (g *Guard) Processes(ctx context.Context) ([]opsapi.Process, error) {
	pm, ok := g.inner.(opsapi.ProcessManager)
	if !ok {
		return nil, unavailable("processes", "")
	}
	return pm.Processes(ctx)
}

// KillProcesses passes through: ending the workspace's own processes only
// ever takes power away from the tenant's commands.
func (g *Guard) KillProcesses(ctx context.Context, pids []int) (int, error) {
	pm, ok := g.inner.(opsapi.ProcessManager)
	if !ok {
		return 0, unavailable("processes", "")
	}
	return pm.KillProcesses(ctx, pids)
}
