// Workspace paths are POSIX whatever the host OS: pi resolves tool paths
// with the host's node:path (pi issue #5350), so a Windows host hands the
// operations `C:\workspace\a.txt` for the workspace's `/workspace/a.txt`.
import * as posix from "node:path/posix";

/**
 * The workspace path for a path pi resolved on the host. On a Windows host
 * (platform "win32") the drive is dropped and backslashes become slashes;
 * elsewhere a backslash is an ordinary file name character and is kept.
 */
export function toWorkspacePath(p: string, platform: string = process.platform): string {
	let q = p;
	if (platform === "win32") {
		q = q.replace(/^\\\\\?\\/, "").replace(/^[A-Za-z]:(?=[\\/]|$)/, "").replace(/\\/g, "/");
		if (q === "") q = "/";
	}
	return q.startsWith("/") ? posix.normalize(q) : q;
}

/**
 * Rewrites a tool's path argument whose meaning pi would take from the host:
 * `~` and `~/x` (after pi's optional leading `@`) name the workspace root,
 * as in the broker's own tools, not the host user's home directory.
 */
export function workspaceArgPath(p: string, root: string): string {
	const q = p.startsWith("@") ? p.slice(1) : p;
	if (q === "~") return root;
	if (q.startsWith("~/")) return posix.join(root, q.slice(2));
	return p;
}
