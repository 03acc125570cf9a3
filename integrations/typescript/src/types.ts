// The wire's JSON bodies in TypeScript (wire/*.go): wire/typescript_test.go
// holds WorkspaceInfo, FileInfo, ExecExit, ToolResult and ToolContent to the
// Go types' JSON fields, so a field added on one side only fails there.

/** A workspace as the broker describes it (wire.WorkspaceInfo). */
export interface WorkspaceInfo {
	id: string;
	backend: string;
	root: string;
	createdAt: string;
	/** Why the workspace's sandbox vanished behind the broker's back; absent while it is there. */
	gone?: string;
	/** What confines the workspace's commands on this host; absent when the backend does not say. */
	confinement?: Confinement;
	/** How calls reach the workspace (docker and ssh); absent for a backend without an in-box agent. */
	transport?: Transport;
	/** The workspace's own filesystem, whose size the kernel holds; absent for a workspace without one. */
	disk?: Disk;
	/** The names of the workspace's environment variables (values are never answered). */
	env?: EnvName[];
}

/** A variable of a workspace's environment as the broker shows it (wire.EnvName). */
export interface EnvName {
	name: string;
	/** Its value is redacted from every output. */
	secret?: boolean;
}

/** A variable of a workspace's environment as it is set (wire.EnvVar). */
export interface EnvVar {
	name: string;
	value: string;
	/** Redact its value from every output. */
	secret?: boolean;
}

/** A workspace's own filesystem (wire.Disk). */
export interface Disk {
	/** Bytes in use: files and the filesystem's own structures. */
	usedBytes: number;
	/** The filesystem's size: writing past it is ENOSPC inside the workspace. */
	limitBytes: number;
}

/** Whether a workspace's calls go through the in-box agent (wire.Transport). */
export interface Transport {
	/** True: through the in-box agent; false: through the backend's fallback. */
	agent: boolean;
	/** Why the fallback is in use, or that the agent starts at the first call. */
	detail?: string;
}

/** A workspace's effective confinement, layer by layer (wire.Confinement). */
export interface Confinement {
	sandboxed: boolean;
	user: boolean;
	uid?: number;
	noNewPrivs: boolean;
	privateTmp: boolean;
	network: "none" | "host";
	/** The Landlock ABI in force, 0 for none. */
	landlockABI: number;
	seccomp: boolean;
	pidNamespace: boolean;
	cgroup: boolean;
}

/** opsapi.FileInfo on the wire, with GET /stat's mime (wire.StatResponse). */
export interface FileInfo {
	name: string;
	type: "file" | "dir" | "symlink" | "other";
	size: number;
	mode: number;
	mtime: string;
	symlink?: boolean;
	mime?: string;
}

/** The exit line of an exec stream (opsapi.ExecResult). */
export interface ExecExit {
	exitCode: number;
	signal?: string;
	timedOut?: boolean;
	canceled?: boolean;
	oomKilled?: boolean;
	memoryLimit?: number;
	killed?: number;
	durationNs?: number;
}

/** One block of a tool result (wire.Content). */
export type ToolContent = { type: "text"; text: string } | { type: "image"; data: string; mimeType: string };

/** A tool result as the broker's tool routes return it (wire.ToolResult). */
export interface ToolResult {
	content: ToolContent[];
	details?: unknown;
	isError?: boolean;
}

/** What starts a background process (wire.StartProcessRequest). */
export interface StartProcessRequest {
	command: string;
	/** Relative to the workspace root. */
	cwd?: string;
	/** `NAME=value` entries; they win over the workspace's environment. */
	env?: string[];
	/** Seconds; 0 or absent: none. */
	timeout?: number;
	/** A label shown in listings. */
	tag?: string;
	/** Keep stdin open for writeStdin; otherwise it is /dev/null. */
	stdin?: boolean;
}

/** A background process (wire.BackgroundProcess). */
export interface BackgroundProcess {
	id: string;
	tag?: string;
	command: string;
	cwd?: string;
	state: "running" | "exited" | "failed";
	startedAt: string;
	endedAt?: string;
	/** How an exited process ended: exitCode is 128+N for signal N. */
	result?: ExecExit;
	/** Why a failed process could not run. */
	error?: string;
	/** Whether its stdin is open for writing. */
	stdin: boolean;
	/** What its log holds: bytes [first, written) of its output. */
	output: { first: number; written: number };
	/** What a running process's tree uses now, where the backend can measure it. */
	usage?: { cpuNs: number; memoryBytes: number };
}

/** One event of a process's log (wire.LogLine, data decoded). */
export type LogEvent =
	/** Output bytes starting at offset. */
	| { type: "output"; offset: number; data: Uint8Array }
	/** The log no longer holds bytes [offset, next): it wrapped. */
	| { type: "dropped"; offset: number; next: number }
	/** The process ended; offset is where its output ends. */
	| { type: "exit"; offset: number; result: ExecExit }
	/** It could not run, or its backend was lost. */
	| { type: "error"; offset: number; code: string; detail: string }
	/** Without follow: it still runs, and offset is where to resume. */
	| { type: "end"; offset: number };

/** A tar's report (wire.ArchiveReport). */
export interface ArchiveReport {
	files: number;
	dirs: number;
	links: number;
	bytes: number;
	/** The entries that did not land (or were left out), each with why. */
	refused: Array<{ name: string; reason: string }>;
}

export type Compression = "auto" | "none" | "gzip" | "zstd";

/** The signals a background process accepts. */
export type SignalName = "SIGHUP" | "SIGINT" | "SIGQUIT" | "SIGKILL" | "SIGUSR1" | "SIGUSR2" | "SIGTERM";

/** opsapi.GlobResult: paths relative to cwd, directories ending in "/". */
export interface GlobResult {
	paths: string[];
	limitReached?: boolean;
	/** Matches the tenant's policy left out. */
	hidden?: number;
}

/** One line of a search (opsapi.SearchLine). */
export interface SearchLine {
	path: string;
	line: number;
	text: string;
	/** False for a context line. */
	match?: boolean;
}

/** opsapi.SearchResult. */
export interface SearchResult {
	lines: SearchLine[];
	limitReached?: boolean;
	hidden?: number;
}

/** A live process of a workspace (GET /processes, "processes"). */
export interface LiveProcess {
	pid: number;
	command: string;
}
