package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Call describes one tool call or raw operation for Decide. Paths are as
// the caller gave them; Decide resolves them lexically against Root.
type Call struct {
	// Tool is the tool being called; empty for a raw operation.
	Tool string
	// Op is the raw operation (see OpTools); empty for a tool call, or for
	// the Guard's checks below a tool (no tool rule applies then).
	Op string
	// Root is the workspace root that relative paths resolve against.
	Root string
	// Read and Write are the paths the call reads and writes.
	Read, Write []string
	// Command is the bash command line, when HasCommand.
	Command    string
	HasCommand bool
	// Timeout is the command's timeout; zero means none.
	Timeout time.Duration
	// Env are the names of the variables the caller passes in.
	Env []string
	// Network is the network mode of a workspace being created.
	Network    string
	HasNetwork bool
}

// Decision is Decide's answer.
type Decision struct {
	Allowed bool
	// Rule names the rule kind that decided a denial (tools, paths.read,
	// paths.write, commands, maxTimeout, env, network, policy).
	Rule string
	// Reason is the model-visible explanation of a denial.
	Reason string
	// Timeout is the timeout to run with: the call's, or MaxTimeout when
	// the call had none.
	Timeout time.Duration
}

// Message is the text a denied tool call returns to the model.
func (d Decision) Message() string { return "Blocked by policy: " + d.Reason }

// OpTools maps a raw operation to the tools whose work it is: the
// operation is allowed when any of them is.
var OpTools = map[string][]string{
	"read":     {"read", "edit"},
	"write":    {"write", "edit"},
	"mkdir":    {"write"},
	"readdir":  {"ls"},
	"glob":     {"find"},
	"search":   {"grep"},
	"exec":     {"bash"},
	"env":      {"bash"},  // a workspace's variables reach only its commands
	"extract":  {"write"}, // a tar into a directory
	"archive":  {"read"},  // a directory out as a tar
	"stat":     Tools,
	"access":   Tools,
	"realpath": Tools,
}

// Decide is the pure decision: no I/O, the same answer for the same call.
// A nil policy allows everything.
func (p *Policy) Decide(c Call) Decision {
	d := Decision{Allowed: true, Timeout: c.Timeout}
	if p == nil {
		return d
	}
	cp := p.mustCompile()
	if cp == nil {
		return deny("policy", "policy %s does not compile", p.label())
	}
	if c.Tool != "" {
		if why := cp.tools.check(c.Tool); why != "" {
			return deny("tools", "tool %q %s", c.Tool, why)
		}
	}
	if c.Op != "" && c.Tool == "" {
		ok := false
		for _, t := range OpTools[c.Op] {
			if cp.tools.check(t) == "" {
				ok = true
				break
			}
		}
		if !ok {
			return deny("tools", "operation %q needs one of the tools %s, which the policy does not allow", c.Op, strings.Join(OpTools[c.Op], ", "))
		}
	}
	for _, pth := range c.Read {
		if why := checkPath(cp.readPaths, c.Root, pth); why != "" {
			return deny("paths.read", "reading %s %s", pth, why)
		}
	}
	for _, pth := range c.Write {
		if why := checkPath(cp.writePaths, c.Root, pth); why != "" {
			return deny("paths.write", "writing %s %s", pth, why)
		}
	}
	if c.HasCommand {
		if why := cp.commands.check(c.Command); why != "" {
			return deny("commands", "the command %s (an advisory command rule)", why)
		}
	}
	if p.MaxTimeout > 0 {
		switch {
		case c.Timeout > p.MaxTimeout:
			return deny("maxTimeout", "timeout %s exceeds the maximum %s", c.Timeout, p.MaxTimeout)
		case c.Timeout == 0 && (c.HasCommand || c.Tool == "bash"):
			d.Timeout = p.MaxTimeout
		}
	}
	for _, name := range c.Env {
		if why := cp.env.check(name); why != "" {
			return deny("env", "environment variable %s %s", name, why)
		}
	}
	if c.HasNetwork {
		if why := cp.network.check(c.Network); why != "" {
			return deny("network", "network mode %q %s", c.Network, why)
		}
	}
	return d
}

func deny(rule, format string, args ...any) Decision {
	return Decision{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// RelPath is the form path globs match: relative to root for a path
// inside it ("." for root itself), absolute otherwise.
func RelPath(root, p string) string {
	if root == "" {
		root = "/"
	}
	abs := resolve(root, p)
	root = path.Clean(root)
	switch {
	case abs == root:
		return "."
	case root == "/":
		return strings.TrimPrefix(abs, "/")
	case strings.HasPrefix(abs, root+"/"):
		return abs[len(root)+1:]
	}
	return abs
}

func resolve(cwd, p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(cwd, p)
}

// checkPath matches relative globs against the root-relative form and
// absolute globs against the absolute one.
func checkPath(m matcher, root, p string) string {
	if len(m.allow) == 0 && len(m.deny) == 0 {
		return ""
	}
	rel := RelPath(root, p)
	abs := resolve(cmpRoot(root), p)
	match := func(pt pattern) bool {
		if strings.HasPrefix(pt.src, "/") {
			return pt.match(abs)
		}
		return !strings.HasPrefix(rel, "/") && pt.match(rel)
	}
	for _, pt := range m.deny {
		if match(pt) {
			return fmt.Sprintf("matches deny rule %q", pt.src)
		}
	}
	if len(m.allow) == 0 || slices.ContainsFunc(m.allow, match) {
		return ""
	}
	return "matches no allow rule"
}

func cmpRoot(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// ReadAllowed reports whether the path rules let p be read; the Guard
// uses it to drop denied files from search, glob and directory results.
func (p *Policy) ReadAllowed(root, pth string) bool {
	if p == nil {
		return true
	}
	cp := p.mustCompile()
	return cp != nil && checkPath(cp.readPaths, root, pth) == ""
}

// hasPathRules reports whether any read (or, with write, write) path rule
// exists.
func (p *Policy) hasPathRules(write bool) bool {
	if p == nil {
		return false
	}
	r := p.Paths.Read
	if write {
		r = p.Paths.Write
	}
	return len(r.Allow) > 0 || len(r.Deny) > 0
}
