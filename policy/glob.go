package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// compileGlob turns a path glob into an anchored regular expression:
// "**" matches any run of characters including '/', "*" any run without
// '/', "?" one character but '/', "[...]" a class as in path.Match,
// "**/" also matches nothing, so "**/.env" matches ".env" at the top, and
// a trailing "/**" also matches the directory itself.
func compileGlob(g string) (*regexp.Regexp, error) {
	if g == "" {
		return nil, fmt.Errorf("empty glob")
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch c {
		case '*':
			if i+1 < len(g) && g[i+1] == '*' {
				i++
				if i == len(g)-1 && strings.HasSuffix(b.String(), "/") {
					// "dir/**" is the tree, dir itself included.
					s := strings.TrimSuffix(b.String(), "/")
					b.Reset()
					b.WriteString(s + "(?:/.*)?")
				} else if i+1 < len(g) && g[i+1] == '/' {
					i++
					b.WriteString("(?:.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end < 0 {
				return nil, fmt.Errorf("glob %q: unclosed [", g)
			}
			class := g[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += end + 1
		case '\\':
			if i+1 < len(g) {
				i++
				b.WriteString(regexp.QuoteMeta(string(g[i])))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("glob %q: %w", g, err)
	}
	return re, nil
}
