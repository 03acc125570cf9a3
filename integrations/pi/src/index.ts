// @wsbroker/pi: pi's tools executing in a wsbroker workspace.
export { BrokerClient, BrokerError, type BrokerTarget, type FileInfo, type ToolResult, type WorkspaceInfo } from "./client.js";
export { type BrokerOperations, type BrokerOperationsOptions, DEFAULT_ENV_ALLOWLIST, brokerOperations } from "./operations.js";
export { toWorkspacePath, workspaceArgPath } from "./paths.js";
export { type AnyToolDefinition, type BrokerTools, type BrokerToolsOptions, brokerTools, callTool, userBashOperations } from "./tools.js";
export { connect, resolveSettings, rewritePromptCwd } from "./extension.js";
