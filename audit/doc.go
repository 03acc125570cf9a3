// Package audit writes the broker's audit trail: one JSON line per request
// and per tool call, shaped after the Kubernetes audit event, chained by
// hash so that an edited, removed or reordered record is found by Verify.
//
// Each line is the event's JSON with a last field "hash": the SHA-256 of
// the line as it would read without that field. The event's "prevHash" is
// the hash of the record before it (64 zeros for the first record ever),
// and "seq" counts records from 1, so a chain split over rotated files is
// verified across them. Records hold digests and safe fields only: no
// token, no file content, no environment value.
//
// The log keeps a space reserve allocated in a hidden file beside its
// file (Options.Reserve), released as records need it when the
// filesystem it shares with workspaces is full, and allocated again by
// Ready once there is room.
package audit
