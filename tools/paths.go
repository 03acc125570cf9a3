package tools

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/wsbroker/wsbroker/opsapi"
)

// unicodeSpaces are the spaces pi's path normalization turns into ASCII
// space (models copy them from macOS file names and rendered text).
var unicodeSpaces = strings.NewReplacer(
	"\u00A0", " ",
	"\u2000", " ", "\u2001", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ",
	"\u2005", " ", "\u2006", " ", "\u2007", " ", "\u2008", " ", "\u2009", " ",
	"\u200A", " ",
	"\u202F", " ",
	"\u205F", " ",
	"\u3000", " ",
)

// expandPath is pi's expandPath with the workspace root as home: Unicode
// spaces become ASCII spaces, then one leading '@' (a model's file
// mention) is dropped, then "~" and "~/x" expand to home. pi ≥0.75.5 maps
// spaces before stripping '@'; that order is kept.
func expandPath(p, home string) string {
	p = unicodeSpaces.Replace(p)
	p = strings.TrimPrefix(p, "@")
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return home + p[1:]
	}
	return p
}

// resolve is pi's resolveToCwd over the workspace namespace: expandPath,
// then an absolute, cleaned POSIX path against the tool cwd.
func (e *toolEnv) resolve(p string) string {
	return opsapi.Resolve(e.cwd, expandPath(p, e.root))
}

var amPm = regexp.MustCompile(`(?i) (AM|PM)\.`)

// readPathVariants are the spellings pi's resolveReadPath tries, in order,
// when the plain path does not exist: macOS screenshot names with a narrow
// no-break space before AM/PM, NFD, a curly apostrophe, and NFD with a curly
// apostrophe.
func readPathVariants(resolved string) []string {
	curly := func(s string) string { return strings.ReplaceAll(s, "'", "\u2019") }
	nfd := norm.NFD.String(resolved)
	return []string{
		amPm.ReplaceAllString(resolved, "\u202F$1."),
		nfd,
		curly(resolved),
		curly(nfd),
	}
}

// resolveRead resolves p as read does and returns the path with the result
// of Access(path, AccessRead) on it, so that read needs no second round
// trip. Unlike pi, which probes the variants on its own host, the probing
// goes through the workspace's Access so that it finds files where they are.
func (e *toolEnv) resolveRead(ctx context.Context, ops opsapi.ReadOperations, p string) (string, error) {
	resolved := e.resolve(p)
	accessErr := ops.Access(ctx, resolved, opsapi.AccessRead)
	if !notExist(accessErr) {
		return resolved, accessErr
	}
	for _, v := range readPathVariants(resolved) {
		if v == resolved {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if err := ops.Access(ctx, v, opsapi.AccessRead); !notExist(err) {
			return v, err
		}
	}
	return resolved, accessErr
}

// notExist reports whether err says the path is missing; a permission error
// means the path exists.
func notExist(err error) bool {
	return err != nil && (errors.Is(err, opsapi.ErrNotExist) || errors.Is(err, opsapi.ErrNotDir))
}
