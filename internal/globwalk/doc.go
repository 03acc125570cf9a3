// Package globwalk finds files by glob the way fd does, over any file
// system that can list a directory and read a small file.
//
// # Overview
//
// pi's find tool runs `fd --glob --hidden --no-require-git`; a backend that
// takes the search off the host must give the same answers. Glob walks the
// search directory depth first in sorted order and reports every entry
// (files, directories with a trailing '/', symbolic links by name) whose
// name or path matches the pattern:
//
//   - A pattern without '/' matches the base name at any depth ("*.ts").
//   - A pattern with '/' matches the whole path relative to the search
//     directory ("src/**/*.spec.ts" finds src/foo/bar/example.spec.ts and
//     not lib/src/x.spec.ts), as pi 1.6.0 anchors it. A leading "./" or "/"
//     is dropped. A trailing "/**" needs something below the directory, as
//     in fd: "a/**" matches a/x but not a itself.
//   - Smart case: a pattern without upper-case letters matches
//     case-insensitively.
//   - Hidden entries are included; symbolic links are never followed.
//
// # Ignore files
//
// .gitignore, .ignore and .fdignore files are honoured in every directory,
// each scoped to its own directory and below, whether or not the tree is a
// git repository (fd --no-require-git); .git/info/exclude is read where a
// .git directory exists. Deeper files take precedence over shallower ones,
// and .fdignore over .ignore over .gitignore, as in fd's ignore crate. An
// ignored directory is not descended into. Ignore files in the directories
// from Request.Top down to the search directory apply as well, so a search
// in a sub-directory sees the same rules as one from the top.
//
// The request's Ignore globs (e.g. "**/node_modules/**", "**/.git/**")
// exclude matching paths and prune matching directories; like the pattern,
// a glob without '/' matches base names.
//
// Matching is done by github.com/bmatcuk/doublestar/v4 and ignore-file
// rules by go-git's plumbing/format/gitignore.
package globwalk
