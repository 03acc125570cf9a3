package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Rule is an allow list and a deny list. Deny wins; an empty allow list
// allows everything not denied.
type Rule struct {
	Allow []string `yaml:"allow,omitempty"`
	Deny  []string `yaml:"deny,omitempty"`
}

// PathRules are globs for reading and, separately, for writing. A glob
// without a leading '/' matches the path relative to the workspace root
// ("src/**", "**/.env"); one with a leading '/' matches the absolute path.
type PathRules struct {
	Read  Rule `yaml:"read,omitempty"`
	Write Rule `yaml:"write,omitempty"`
}

// RedactRule replaces every match of Pattern (a Go regular expression) in
// what leaves the broker.
type RedactRule struct {
	Name        string `yaml:"name"`
	Pattern     string `yaml:"pattern"`
	Replacement string `yaml:"replacement,omitempty"` // default "[REDACTED:<name>]"
}

// Policy is one policy file. The zero Policy allows everything and
// redacts nothing.
type Policy struct {
	// Name labels the policy in reasons and audit records.
	Name string `yaml:"name,omitempty"`
	// Tools allows or denies tools by name (read, write, edit, bash, grep,
	// find, ls); "*" is any tool.
	Tools Rule `yaml:"tools,omitempty"`
	// Paths are the read and write globs.
	Paths PathRules `yaml:"paths,omitempty"`
	// Commands are regular expressions over a bash command line. Advisory:
	// a shell can always reach what the sandbox allows; they stop honest
	// mistakes and make intent auditable, the sandbox is the boundary.
	Commands Rule `yaml:"commands,omitempty"`
	// MaxTimeout caps a command's timeout; a command without one gets it.
	MaxTimeout time.Duration `yaml:"maxTimeout,omitempty"`
	// Env allows environment variable names (globs) a caller may pass to a
	// command; the deny list wins.
	Env Rule `yaml:"env,omitempty"`
	// Network allows network modes for new workspaces ("none", "bridge",
	// "host" for backends that share the host's network: local and ssh).
	Network Rule `yaml:"network,omitempty"`
	// Redact rules apply to every result and streamed update.
	Redact []RedactRule `yaml:"redact,omitempty"`

	compiled *compiled
}

// compiled holds the parsed globs and expressions.
type compiled struct {
	tools, network        matcher
	readPaths, writePaths matcher
	commands, env         matcher
	redactor              *Redactor
}

type matcher struct {
	allow, deny []pattern
}

// pattern is one rule entry: its source and its matcher (a glob or,
// for commands, a regular expression).
type pattern struct {
	src   string
	match func(string) bool
}

// Tools are the tool names a policy may name.
var Tools = []string{"read", "write", "edit", "bash", "grep", "find", "ls"}

// Parse reads one YAML policy; unknown keys are errors, so a typo cannot
// silently allow what it meant to deny.
func Parse(data []byte) (*Policy, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := p.Compile(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Compile checks every rule and prepares it. Parse compiles; a Policy
// built in code must be compiled before it is shared between goroutines
// (Decide compiles on demand, which is not safe concurrently).
func (p *Policy) Compile() error {
	if p.compiled != nil {
		return nil
	}
	var c compiled
	var errs []error
	word := func(name string, r Rule, known []string) matcher {
		m, err := compileRule(r, compileGlob)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		for _, v := range slices.Concat(r.Allow, r.Deny) {
			if known != nil && v != "*" && !slices.Contains(known, v) {
				errs = append(errs, fmt.Errorf("%s: unknown name %q (want one of %s)", name, v, strings.Join(known, ", ")))
			}
		}
		return m
	}
	c.tools = word("tools", p.Tools, Tools)
	c.network = word("network", p.Network, nil)
	c.env = word("env", p.Env, nil)
	c.readPaths = word("paths.read", p.Paths.Read, nil)
	c.writePaths = word("paths.write", p.Paths.Write, nil)
	var err error
	c.commands, err = compileRule(p.Commands, compileRegexp)
	if err != nil {
		errs = append(errs, fmt.Errorf("commands: %w", err))
	}
	if p.MaxTimeout < 0 {
		errs = append(errs, errors.New("maxTimeout: must not be negative"))
	}
	c.redactor, err = NewRedactor(p.Redact)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("policy %s: %w", p.label(), err)
	}
	p.compiled = &c
	return nil
}

// compileRegexp is compileGlob's counterpart for command rules.
func compileRegexp(s string) (func(string) bool, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	return re.MatchString, nil
}

func compileRule(r Rule, compile func(string) (func(string) bool, error)) (matcher, error) {
	var m matcher
	var errs []error
	for _, list := range []struct {
		src []string
		dst *[]pattern
	}{{r.Allow, &m.allow}, {r.Deny, &m.deny}} {
		for _, s := range list.src {
			match, err := compile(s)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			*list.dst = append(*list.dst, pattern{src: s, match: match})
		}
	}
	return m, errors.Join(errs...)
}

// check returns "" when s passes the rule, else why not.
func (m matcher) check(s string) string {
	for _, p := range m.deny {
		if p.match(s) {
			return fmt.Sprintf("matches deny rule %q", p.src)
		}
	}
	if len(m.allow) == 0 {
		return ""
	}
	for _, p := range m.allow {
		if p.match(s) {
			return ""
		}
	}
	return "matches no allow rule"
}

func (p *Policy) label() string {
	if p.Name == "" {
		return "(unnamed)"
	}
	return p.Name
}

// Redactor returns the policy's redactor (never nil).
func (p *Policy) Redactor() *Redactor {
	if p == nil || p.mustCompile() == nil {
		return &Redactor{}
	}
	return p.compiled.redactor
}

// mustCompile compiles a policy built in code; one that does not compile
// denies everything (see Decide), so it returns nil then.
func (p *Policy) mustCompile() *compiled {
	if err := p.Compile(); err != nil {
		return nil
	}
	return p.compiled
}

// Explain describes every rule of the policy in words, for
// `broker policy check`.
func (p *Policy) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %s\n", p.label())
	rule := func(name, what string, r Rule) {
		switch {
		case len(r.Allow) == 0 && len(r.Deny) == 0:
			fmt.Fprintf(&b, "- %s: no rule; every %s is allowed\n", name, what)
		default:
			if len(r.Allow) > 0 {
				fmt.Fprintf(&b, "- %s: only a %s matching one of %q is allowed\n", name, what, r.Allow)
			} else {
				fmt.Fprintf(&b, "- %s: every %s is allowed unless denied\n", name, what)
			}
			if len(r.Deny) > 0 {
				fmt.Fprintf(&b, "  and a %s matching any of %q is denied (deny wins)\n", what, r.Deny)
			}
		}
	}
	rule("tools", "tool", p.Tools)
	rule("paths.read", "path read (relative globs match under the workspace root, /-globs the absolute path)", p.Paths.Read)
	rule("paths.write", "path written", p.Paths.Write)
	rule("commands", "command line (regular expressions; advisory: the sandbox, not the pattern, is the boundary)", p.Commands)
	if p.MaxTimeout > 0 {
		fmt.Fprintf(&b, "- maxTimeout: a command may run at most %s; one without a timeout gets %s\n", p.MaxTimeout, p.MaxTimeout)
	} else {
		b.WriteString("- maxTimeout: none; commands may run without a timeout\n")
	}
	rule("env", "environment variable name passed to a command", p.Env)
	rule("network", "network mode of a new workspace (local and ssh count as \"host\")", p.Network)
	if len(p.Redact) == 0 {
		b.WriteString("- redact: nothing is redacted\n")
	}
	for _, r := range p.Redact {
		repl := r.Replacement
		if repl == "" {
			repl = "[REDACTED:" + r.Name + "]"
		}
		fmt.Fprintf(&b, "- redact %s: matches of %q become %q in results, streamed updates and exec output\n", r.Name, r.Pattern, repl)
	}
	return b.String()
}
