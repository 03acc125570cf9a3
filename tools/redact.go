package tools

import "context"

type redactKey struct{}

// WithRedaction returns ctx carrying redact, which a tool applies to
// content before it cuts it (grep's lines of GrepMaxLineLength): a secret
// cut in two no longer matches its rule, so redacting the result after
// the cut would leave its first half in it. The caller still redacts the
// whole result.
func WithRedaction(ctx context.Context, redact func(string) string) context.Context {
	return context.WithValue(ctx, redactKey{}, redact)
}

// redaction is ctx's redaction, or nil.
func redaction(ctx context.Context) func(string) string {
	r, _ := ctx.Value(redactKey{}).(func(string) string)
	return r
}
