// Package execsftp carries SFTP over the stdio of one long-lived command
// in a box: the file operations of a workspace without the in-box agent
// (docker's no-agent path, where that command is an engine exec).
//
// The command is a POSIX sh script that first reports the account's ids
// (from its own /proc status: no program needed) and then execs the first
// SFTP server it finds among the given paths, naming it, all on control
// lines on stderr; anything else the server prints there is logged. A
// Channel opens that command at the first use and opens another when it
// died (its server killed, its stream cut) or a caller found it broken;
// concurrent callers share one start.
package execsftp
