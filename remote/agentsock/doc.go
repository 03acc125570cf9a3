// Package agentsock starts the in-box agent so that it connects back to
// the broker through a directory the broker shares with the box (a bind
// mount): the broker listens on a Unix socket there, for that start only,
// starts the agent in one command with fresh TLS keys on its stdin, and
// takes its connection. Nothing crosses the box's own command channel
// after that (for docker, the engine's exec).
//
// The directory is the broker's: it is made empty, owned by the broker
// and open to nobody else for writing before each start, and the box
// sees it read-only, so nothing in the box can fill it or make it
// unusable. The agent says "ready" on its stdout once connected; anything
// else (its exit) ends the wait at once, with what it said on stderr.
package agentsock
