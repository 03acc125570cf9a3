// Package warmpool keeps a backend's members made ahead: workspaces
// (containers, pods) already running with their agent connected, handed
// to creates whose settings they were made with. What a member is, how
// it is made, claimed and removed is the backend's; this package holds
// the ready members, refills them one at a time, and checks the pools'
// configuration.
package warmpool
