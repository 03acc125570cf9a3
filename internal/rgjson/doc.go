// Package rgjson runs the search half of the grep tool the same way on
// every backend: the ripgrep command line, the reading of its --json
// output in bounded memory, and what its exit status means.
//
// # Overview
//
// Args builds `rg --json --line-number --color=never --hidden --no-config
// [--ignore-case] [--fixed-strings] [--glob G] [--context N] -- PATTERN`
// from an opsapi.SearchRequest; the caller appends the target. Collect
// reads the JSON stream into an opsapi.SearchResult, keeping at most Limit
// matches with their context lines, and says when it stopped early so the
// caller can stop ripgrep. Result turns ripgrep's exit status and stderr
// into the result or a typed error.
//
// # Remote searches
//
// Remote.Search is the whole search where ripgrep runs on the far side of
// a transport (a docker exec, an SSH session): it stats the path, runs
// Script (which reports a missing rg), collects the results, stops rg when
// they are cut short and maps its exit. The backend gives only Start, the
// way it starts a command, and the Process it returns.
//
// # Memory
//
// Collect never holds more than a bounded amount of one JSON message: a
// line's text is cut at MaxLineBytes, strings it does not need are skipped
// as they stream past, and the kept text of all lines stops at
// MaxResultBytes (the search then ends as if at its limit). A 1 GiB line
// in a searched file costs kilobytes, not a gigabyte.
package rgjson
