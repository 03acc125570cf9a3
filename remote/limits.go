package remote

import (
	"cmp"
	"fmt"
)

// Lower applies a create request's limit asked (zero: not asked) to have,
// the configured one: a request may lower a limit, never raise it, nor go
// below lo. have takes asked either way; the problem is returned, named
// name ("limits.cpus").
func Lower[T cmp.Ordered](name string, asked, lo T, have *T) error {
	var zero T
	if asked == zero {
		return nil
	}
	hi := *have
	*have = asked
	if asked < lo || asked > hi {
		return fmt.Errorf("%s %v must be between %v and %v", name, asked, lo, hi)
	}
	return nil
}
