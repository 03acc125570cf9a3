// Package tenant holds the broker's tenants: who a bearer token belongs
// to, what that tenant may use (backends, images, quotas) and which
// policy applies. Tokens are kept only as SHA-256 hashes and compared in
// constant time; a Registry is immutable, so a reload builds a new one
// and swaps it in whole.
package tenant
