// Command broker is the sandboxed workspace broker in one binary.
//
// # Overview
//
//	broker serve                              run the HTTP service (local backend, zero config)
//	broker ws create | ls | rm <id>           manage workspaces
//	broker tool <ws> <name> '<json args>'     run one of the seven tools
//	broker exec <ws> -- <command...>          run a command, stream its output
//	broker version                            print build information
//
// main only hands the process's arguments to package cli, which holds
// every subcommand; the server itself lives in package broker.
package main
