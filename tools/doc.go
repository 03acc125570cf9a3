// Package tools implements pi's seven coding-agent tools (read, write, edit,
// bash, grep, find, ls) once, over the opsapi interfaces, so that every
// backend behaves exactly like pi's built-in tools.
//
// # Overview
//
// A Toolbox is built for one workspace with New. It registers each tool
// whose opsapi interface the workspace implements (found by type
// assertion), and Call runs a tool the way pi's agent loop does: unknown
// tool, argument shim (PrepareArguments), JSON Schema validation with
// TypeBox's coercions, then Execute; every failure becomes an isError
// Result whose text is exactly what pi would show the model.
//
// # Strings
//
// Result texts, notices and error messages are pi's, byte for byte (see
// the project's pi tool contract). Where pi versions differ, the newest
// recorded behaviour is implemented.
//
// # Concurrency
//
// Tools may run concurrently. write and edit serialize per file through a
// MutationQueue keyed by the file's canonical path (opsapi.Resolver), in
// call order, as pi's withFileMutationQueue does.
//
// # Memory
//
// read streams text files and keeps only the lines it shows; grep, find and
// ls rely on the backend to bound their results with a limit.
package tools
