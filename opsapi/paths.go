package opsapi

import (
	"path"
	"strings"
)

// Resolve turns p into an absolute, cleaned POSIX path: an absolute p is
// cleaned, a relative one is joined to cwd. It never consults the host OS,
// so a Windows host and a Linux workspace agree on what "/root/x" means.
func Resolve(cwd, p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(cwd, p)
}

// Within reports whether the cleaned absolute path p is root or inside it.
func Within(root, p string) bool {
	root, p = path.Clean(root), path.Clean(p)
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
