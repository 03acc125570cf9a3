// @wsbroker/pi: pi's tools executing in a wsbroker workspace.
export { BrokerClient, FsError, type BrokerTarget, type EnvVar, type ExecExit, type FileInfo, type ToolResult, type WorkspaceInfo } from "./client.js";
export { type BrokerOperations, type BrokerOperationsOptions, DEFAULT_ENV_ALLOWLIST, brokerOperations } from "./operations.js";
export { type Pi, type PiPackage, findHostPi, importPiByName, loadHostPi } from "./host.js";
export { toWorkspacePath, workspaceArgPath } from "./paths.js";
export { type AnyToolDefinition, type BrokerTools, type BrokerToolsOptions, brokerTools, callTool, userBashOperations } from "./tools.js";
export { PROCESS_TOOL_NAMES, processTools } from "./process-tools.js";
// The generic client lives in the SDK; the names this package exported before are re-exported from it.
export {
	type ArchiveReport,
	type BackgroundProcess,
	Broker,
	BrokerError,
	type Compression,
	type LogEvent,
	type SignalName,
	type StartProcessRequest,
	Terminal,
	type TerminalOptions,
	Workspace,
} from "@wsbroker/sdk";
export { connect, resolveSettings, rewritePromptCwd } from "./extension.js";
