package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// compileGlob checks a glob and returns its matcher. The dialect is
// doublestar's, the one the find tool and globwalk use, so a pattern
// means the same in a policy as in a search. One rewrite keeps what
// docs/policy.md promises: "**" crosses segments even inside a segment
// ("src**", "**.pem"), where doublestar would read it as "*" and a deny
// rule would silently cover less (see starsAcrossSegments).
func compileGlob(g string) (func(string) bool, error) {
	if g == "" {
		return nil, errors.New("empty glob")
	}
	rewritten := starsAcrossSegments(g)
	if !doublestar.ValidatePattern(rewritten) {
		return nil, fmt.Errorf("glob %q: %w", g, doublestar.ErrBadPattern)
	}
	return func(name string) bool {
		// The pattern is valid, so Match cannot fail.
		ok, _ := doublestar.Match(rewritten, name)
		return ok
	}, nil
}

// anyRun is doublestar for "any run of characters, '/' included": none
// or more within one segment, or across two or more segments.
const anyRun = "{*,*/**/*}"

// starsAcrossSegments rewrites each "**" that is not a whole path segment
// (one with other characters beside it in its segment) into anyRun. A
// whole-segment "**" ("a/**/b", "**/.env", "dir/**") is left to
// doublestar, which already gives it the documented meaning. Escaped
// stars and stars inside a [...] class are not touched.
func starsAcrossSegments(g string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c == '\\' && i+1 < len(g):
			b.WriteString(g[i : i+2])
			i++
			continue
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '*' && i+1 < len(g) && g[i+1] == '*':
			end := i + 2
			for end < len(g) && g[end] == '*' {
				end++ // "***" reads as "**"
			}
			wholeSegment := (i == 0 || g[i-1] == '/') && (end == len(g) || g[end] == '/')
			if wholeSegment {
				b.WriteString("**")
			} else {
				b.WriteString(anyRun)
			}
			i = end - 1
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
