// @wsbroker/sdk: the TypeScript SDK of wsbroker (docs/sdk-typescript.md).
export { Broker, type BrokerOptions, type CreateOptions, DEFAULT_URL, resolveConnection } from "./broker.js";
export * from "./errors.js";
export { ExecStream, type ExecEvent, type ExecOptions, type RunResult, envList } from "./exec.js";
export { type Answer, type Body, type RequestOptions, Transport, ndjson, readAll } from "./http.js";
export { type LogRead, Processes } from "./processes.js";
export { Terminal, type TerminalOptions } from "./terminal.js";
export { type Edit, Tools, textOf } from "./tools.js";
export type * from "./types.js";
export { type GlobOptions, type GrepOptions, Workspace, webStream } from "./workspace.js";
