package policy

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Guard wraps a backend workspace and is where the policy is decided:
// Admit decides a whole call before it runs (a tool call: its tool rule
// and what its arguments touch; a raw operation: the tools it needs), and
// every operation that reaches the workspace through the Guard decides
// what it really touches (a path a tool resolved, a link's target, the
// entries of a listing). A path the call's admission already decided is
// not decided again. Abilities with nothing to decide (Destroyer,
// ProcessManager) are not wrapped: opsapi.As finds them through Unwrap.
// The Guard implements every operations interface; one the wrapped
// workspace lacks answers ErrUnavailable, and opsapi.As does not offer it.
type Guard struct {
	inner  opsapi.Workspace
	policy func() *Policy
	// onDeny hears every denial, for the audit log.
	onDeny func(ctx context.Context, op string, d Decision)
}

// Every interface the wrapper decides on. The broker's test walks opsapi's
// source and fails when one is added and neither decided on here nor
// passed through.
var (
	_ opsapi.Operations     = (*Guard)(nil)
	_ opsapi.EditOperations = (*Guard)(nil)
	_ opsapi.Resolver       = (*Guard)(nil)
	_ opsapi.Unwrapper      = (*Guard)(nil)
	_ opsapi.HidingLister   = (*Guard)(nil)
	_ opsapi.TreeOperations = (*Guard)(nil)
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

// Admit decides a call before it runs: a tool call (Tool set) or a raw
// operation (Op set), with the paths, command, timeout and env it gives.
// A denial is heard by onDeny and returned as ErrDenied named for the
// operation (or tool) and the call's first path. The returned context
// carries the admission: operations run with it do not decide the same
// path or command again.
func (g *Guard) Admit(ctx context.Context, c Call) (context.Context, Decision, error) {
	op := c.Op
	if op == "" {
		op = c.Tool
	}
	p := ""
	if len(c.Read) > 0 {
		p = c.Read[0]
	} else if len(c.Write) > 0 {
		p = c.Write[0]
	}
	d, err := g.decide(ctx, op, p, c)
	if err != nil {
		return ctx, d, err
	}
	return context.WithValue(ctx, admittedKey{}, admitted{guard: g, call: c, d: d}), d, nil
}

// admittedKey carries an admitted call through the operations it makes.
type admittedKey struct{}

type admitted struct {
	guard *Guard
	call  Call
	d     Decision
}

// covers reports whether the admitted call already decided c: every path
// of c (resolved against the root) and its command, timeout and env.
func (a admitted) covers(root string, c Call) bool {
	in := func(ps, decided []string) bool {
		for _, p := range ps {
			found := false
			for _, q := range decided {
				if resolve(cmpRoot(root), p) == resolve(cmpRoot(root), q) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	if !in(c.Read, a.call.Read) || !in(c.Write, a.call.Write) {
		return false
	}
	if c.HasCommand && (a.call.Command != c.Command || a.call.Timeout != c.Timeout ||
		!subset(c.Env, a.call.Env) || !(a.call.HasCommand || a.call.Tool == "bash")) {
		return false
	}
	return !c.HasNetwork
}

func subset(names, of []string) bool {
	for _, n := range names {
		if !slices.Contains(of, n) {
			return false
		}
	}
	return true
}

// check decides an operation's own call, unless the call's admission
// already decided it.
func (g *Guard) check(ctx context.Context, op, p string, c Call) (Decision, error) {
	if a, ok := ctx.Value(admittedKey{}).(admitted); ok && a.guard == g && a.covers(g.inner.Root(), c) {
		return a.d, nil
	}
	return g.decide(ctx, op, p, c)
}

// decide is the one place a workspace's calls meet the policy.
func (g *Guard) decide(ctx context.Context, op, p string, c Call) (Decision, error) {
	c.Root = g.inner.Root()
	d := g.policy().Decide(c)
	if d.Allowed {
		return d, nil
	}
	g.onDeny(ctx, op, d)
	return d, opsapi.E(op, p, opsapi.ErrDenied, errors.New(d.Message()))
}

// checkReal also checks the path a symbolic link leads to, when the inner
// workspace can resolve it: "src/link -> ../.env" is read as ".env". It
// returns the absolute path the operation really touches: the resolved
// one, or p's own when there is nothing to resolve.
func (g *Guard) checkReal(ctx context.Context, op, p string, write bool) (string, error) {
	c := Call{Read: []string{p}}
	if write {
		c = Call{Write: []string{p}}
	}
	if _, err := g.check(ctx, op, p, c); err != nil {
		return "", err
	}
	abs := opsapi.Resolve(g.inner.Root(), p)
	rp, ok := g.resolve(ctx, p, write)
	if !ok || rp == abs {
		return abs, nil // nothing else to check; the operation reports a missing path itself
	}
	if write {
		c = Call{Write: []string{rp}}
	} else {
		c = Call{Read: []string{rp}}
	}
	if _, err := g.check(ctx, op, p, c); err != nil {
		return "", err
	}
	return rp, nil
}

// resolve is the real path of p when the policy has path rules a link
// could get around and the inner workspace can resolve it. A path that
// does not exist yet (a write) resolves through its directory.
func (g *Guard) resolve(ctx context.Context, p string, write bool) (string, bool) {
	rs, ok := g.inner.(opsapi.Resolver)
	if pol := g.policy(); !ok || !pol.hasPathRules(write) {
		return "", false // spare the lookup
	}
	rp, err := rs.RealPath(ctx, p)
	if err != nil && write {
		dir, base := path.Split(opsapi.Resolve(g.inner.Root(), p))
		if rp, err = rs.RealPath(ctx, dir); err == nil {
			rp = path.Join(rp, base)
		}
	}
	return rp, err == nil
}

// readable reports whether the read rules allow name, found under dir
// (the path as asked) and under real (where dir really is).
func readable(pol *Policy, root, dir, real, name string) bool {
	return pol.ReadAllowed(root, path.Join(dir, name)) && (real == dir || pol.ReadAllowed(root, path.Join(real, name)))
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
	if _, err := g.checkReal(ctx, "open", p, false); err != nil {
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
		if _, err := g.checkReal(ctx, "access", p, false); err != nil {
			return err
		}
	}
	if mode&opsapi.AccessWrite != 0 {
		if _, err := g.checkReal(ctx, "access", p, true); err != nil {
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
	if _, err := g.checkReal(ctx, "write", p, true); err != nil {
		return err
	}
	return wo.WriteFile(ctx, p, r)
}

// Mkdir checks the write rules, following links: a directory made through
// a linked parent lands where the link leads.
func (g *Guard) Mkdir(ctx context.Context, p string) error {
	wo, ok := g.inner.(opsapi.WriteOperations)
	if !ok {
		return unavailable("mkdir", p)
	}
	if _, err := g.checkReal(ctx, "mkdir", p, true); err != nil {
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

// Stat checks the read rules, following links: size and type are part of
// what a file says.
func (g *Guard) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	st, ok := g.inner.(statter)
	if !ok {
		return opsapi.FileInfo{}, unavailable("stat", p)
	}
	if _, err := g.checkReal(ctx, "stat", p, false); err != nil {
		return opsapi.FileInfo{}, err
	}
	return st.Stat(ctx, p)
}

// ReadDir checks the directory and drops entries the read rules hide.
func (g *Guard) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	entries, _, err := g.ReadDirHiding(ctx, p)
	return entries, err
}

// ReadDirHiding is ReadDir, plus how many entries the read rules hid.
func (g *Guard) ReadDirHiding(ctx context.Context, p string) ([]opsapi.FileInfo, int, error) {
	ls, ok := g.inner.(opsapi.LsOperations)
	if !ok {
		return nil, 0, unavailable("readdir", p)
	}
	real, err := g.checkReal(ctx, "readdir", p, false)
	if err != nil {
		return nil, 0, err
	}
	entries, err := ls.ReadDir(ctx, p)
	if err != nil {
		return nil, 0, err
	}
	pol, root, dir := g.policy(), g.inner.Root(), opsapi.Resolve(g.inner.Root(), p)
	out := entries[:0]
	for _, e := range entries {
		if readable(pol, root, dir, real, e.Name) && g.linkReadable(ctx, e, path.Join(dir, e.Name)) {
			out = append(out, e)
		}
	}
	return out, len(entries) - len(out), nil
}

// linkReadable reports whether an entry that is a symbolic link leads
// somewhere the read rules allow: its size and type are the target's.
func (g *Guard) linkReadable(ctx context.Context, e opsapi.FileInfo, full string) bool {
	if !e.Symlink {
		return true
	}
	rp, ok := g.resolve(ctx, full, false)
	return !ok || g.policy().ReadAllowed(g.inner.Root(), rp)
}

// Search checks the searched path and drops lines of files the read rules
// hide, so "grep SECRET ." cannot read a denied .env.
func (g *Guard) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	gr, ok := g.inner.(opsapi.GrepOperations)
	if !ok {
		return opsapi.SearchResult{}, unavailable("search", req.Path)
	}
	real, err := g.checkReal(ctx, "search", req.Path, false)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	res, err := gr.Search(ctx, req)
	if err != nil {
		return res, err
	}
	pol, root := g.policy(), g.inner.Root()
	base := opsapi.Resolve(root, req.Path)
	if fi, err := gr.Stat(ctx, req.Path); err == nil && !fi.IsDir() {
		return res, nil // a single file, allowed as asked and as resolved above
	}
	out := res.Lines[:0]
	for _, l := range res.Lines {
		switch {
		case readable(pol, root, base, real, l.Path):
			out = append(out, l)
		case l.Match:
			res.Hidden++
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
	real, err := g.checkReal(ctx, "glob", req.Dir, false)
	if err != nil {
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
		if readable(pol, root, base, real, p) {
			out = append(out, p)
		}
	}
	res.Hidden += len(res.Paths) - len(out)
	res.Paths = out
	return res, nil
}

// RealPath checks the read rules on the path asked about.
func (g *Guard) RealPath(ctx context.Context, p string) (string, error) {
	rs, ok := g.inner.(opsapi.Resolver)
	if !ok {
		return "", unavailable("realpath", p)
	}
	if _, err := g.checkReal(ctx, "realpath", p, false); err != nil {
		return "", err
	}
	return rs.RealPath(ctx, p)
}

// Symlink checks the write rules on the link's own path, following links
// among its parents. The target is not decided: whatever later reads or
// writes through the link is decided where the link leads.
func (g *Guard) Symlink(ctx context.Context, target, p string) error {
	to, ok := g.inner.(opsapi.TreeOperations)
	if !ok {
		return unavailable("symlink", p)
	}
	if _, err := g.checkReal(ctx, "symlink", p, true); err != nil {
		return err
	}
	return to.Symlink(ctx, target, p)
}

// Readlink checks the read rules, following links, as Stat does: a link
// whose target the rules hide says nothing of it.
func (g *Guard) Readlink(ctx context.Context, p string) (string, error) {
	to, ok := g.inner.(opsapi.TreeOperations)
	if !ok {
		return "", unavailable("readlink", p)
	}
	if _, err := g.checkReal(ctx, "readlink", p, false); err != nil {
		return "", err
	}
	return to.Readlink(ctx, p)
}

// Chmod checks the write rules, following links: the mode changes where
// the link leads.
func (g *Guard) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	to, ok := g.inner.(opsapi.TreeOperations)
	if !ok {
		return unavailable("chmod", p)
	}
	if _, err := g.checkReal(ctx, "chmod", p, true); err != nil {
		return err
	}
	return to.Chmod(ctx, p, mode)
}
