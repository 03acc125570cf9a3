package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The texts below are pi's, byte for byte, in their newest recorded form
// (read lists bmp, grep/find describe globs relative to the search path as
// in 1.6.0, bash keeps "Bash command to execute"). Parameter schemas are
// what TypeBox emits for pi's Type.Object definitions.

const (
	readDescription = "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, bmp). " +
		"Images are sent as attachments. For text files, output is truncated to 2000 lines or 50KB " +
		"(whichever is hit first). Use offset/limit for large files. When you need the full file, " +
		"continue with offset until complete."
	bashDescription = "Execute a bash command in the current working directory. Returns stdout and stderr. " +
		"Output is truncated to last 2000 lines or 50KB (whichever is hit first). If truncated, full output " +
		"is saved to a temp file. Optionally provide a timeout in seconds."
	editDescription = "Edit a single file using exact text replacement. Every edits[].oldText must match a " +
		"unique, non-overlapping region of the original file. If two changes affect the same block or nearby " +
		"lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged " +
		"regions just to connect distant changes."
	writeDescription = "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. " +
		"Automatically creates parent directories."
	grepDescription = "Search file contents for a pattern. Returns matching lines with file paths and line " +
		"numbers. Respects .gitignore. Output is truncated to 100 matches or 50KB (whichever is hit first). " +
		"Long lines are truncated to 500 chars."
	findDescription = "Search for files by glob pattern. Returns matching file paths relative to the search " +
		"directory. Respects .gitignore. Output is truncated to 1000 results or 50KB (whichever is hit first)."
	lsDescription = "List directory contents. Returns entries sorted alphabetically, with '/' suffix for " +
		"directories. Includes dotfiles. Output is truncated to 500 entries or 50KB (whichever is hit first)."
)

const readSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
    "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
    "limit": {"type": "number", "description": "Maximum number of lines to read"}
  },
  "required": ["path"]
}`

const bashSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "Bash command to execute"},
    "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}
  },
  "required": ["command"]
}`

// editSchema has no top-level oldText/newText (legacy shapes are folded by
// the edit tool's PrepareArguments) and, as in pi ≥0.80.4, allows extra
// fields in each edit.
const editSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
    "edits": {
      "type": "array",
      "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead.",
      "items": {
        "type": "object",
        "properties": {
          "oldText": {"type": "string", "description": "Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."},
          "newText": {"type": "string", "description": "Replacement text for this targeted edit."}
        },
        "required": ["oldText", "newText"]
      }
    }
  },
  "required": ["path", "edits"]
}`

const writeSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
    "content": {"type": "string", "description": "Content to write to the file"}
  },
  "required": ["path", "content"]
}`

const grepSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
    "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
    "glob": {"type": "string", "description": "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
    "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
    "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
    "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
    "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
  },
  "required": ["pattern"]
}`

const findSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
    "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
    "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
  },
  "required": ["pattern"]
}`

const lsSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory to list (default: current directory)"},
    "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"}
  }
}`

type definitionText struct {
	description, schema, snippet string
}

var definitionTexts = map[string]definitionText{
	"read":  {readDescription, readSchema, "Read file contents"},
	"bash":  {bashDescription, bashSchema, "Execute bash commands (ls, grep, find, etc.)"},
	"edit":  {editDescription, editSchema, "Make precise file edits with exact text replacement, including multiple disjoint edits in one call"},
	"write": {writeDescription, writeSchema, "Create or overwrite files"},
	"grep":  {grepDescription, grepSchema, "Search file contents for patterns (respects .gitignore)"},
	"find":  {findDescription, findSchema, "Find files by glob pattern (respects .gitignore)"},
	"ls":    {lsDescription, lsSchema, "List directory contents"},
}

// definitionOf returns the Definition of one of the seven tools; it panics
// on an unknown name, which only a programming error can produce.
func definitionOf(name string) Definition {
	t, ok := definitionTexts[name]
	if !ok {
		panic(fmt.Sprintf("tools: no definition for %q", name))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(t.schema)); err != nil {
		panic(fmt.Sprintf("tools: schema of %s: %v", name, err))
	}
	return Definition{
		Name:          name,
		Label:         name,
		Description:   t.description,
		Parameters:    json.RawMessage(compact.Bytes()),
		PromptSnippet: t.snippet,
	}
}
