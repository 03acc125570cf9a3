// Package httpguard is the broker's generic HTTP hardening: what any
// server facing untrusted clients needs, with nothing of workspaces,
// tenants or the broker's routes in it.
//
//   - CheckJSON and Decode: a request's JSON body is exactly one value,
//     nested at most MaxJSONDepth deep, with no key given twice nor two
//     keys differing only in case, and it decodes into its Go type with
//     no unknown field, a mismatch naming its field;
//   - BodyBudget: the bytes of request bodies held in memory at once,
//     over all requests, are bounded (ErrOverBudget past it);
//   - Pace and PacedBody: a request body that stalls, or trickles in
//     slower than a minimum rate, times out (ErrSlowBody);
//   - ConnLimiter: a listener holding at most so many connections open,
//     and so many from one IP address;
//   - PeerLimiter: a request rate per peer address over a bounded table
//     of peers, for the requests a server answers before it knows who
//     sent them;
//   - HostSet: the Host names a server answers for, against DNS
//     rebinding.
//
// Errors are plain messages for the client to read: the caller (package
// broker) wraps them in its own error kinds, which pick the status. This
// package imports nothing of the project.
package httpguard
