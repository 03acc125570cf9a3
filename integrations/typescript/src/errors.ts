// The broker's errors as classes: one per code of the wire's error table
// (wire.Codes, docs/api.md "Errors"), each a BrokerError carrying the code,
// the HTTP status, the broker's detail and the request id. test/errors.test.ts
// fails when wire/testdata/codes.json (generated from wire.Codes) names a code
// this table lacks, or gives one another status.

/** An error answered by the broker: an RFC 9457 problem document. */
export class BrokerError extends Error {
	/** The stable problem code ("not_exist", "denied", ...): switch on this or the class. */
	readonly code: string;
	/** The HTTP status it came with. */
	readonly status: number;
	/** The broker's own words (not stable). */
	readonly detail: string;
	/** The broker's X-Request-Id for the call, for its logs and audit trail. */
	readonly requestId?: string;
	constructor(code: string, status: number, detail: string, requestId?: string) {
		super(detail ? `${code}: ${detail}` : `${code} (HTTP ${status})`);
		this.name = new.target.name;
		this.code = code;
		this.status = status;
		this.detail = detail;
		this.requestId = requestId;
	}
}

/** `not_exist` 404: the path does not exist. */
export class NotExistError extends BrokerError {}
/** `exists` 409: something already exists there. */
export class ExistsError extends BrokerError {}
/** `permission` 403: not allowed, or outside a confined root. */
export class PermissionError extends BrokerError {}
/** `is_dir` 409: a directory where a file was needed. */
export class IsDirError extends BrokerError {}
/** `not_dir` 409: a file where a directory was needed. */
export class NotDirError extends BrokerError {}
/** `invalid` 400: a value no backend accepts. */
export class InvalidError extends BrokerError {}
/** `timeout` 504: an operation timed out. */
export class TimeoutError extends BrokerError {}
/** `canceled` 499: the call was canceled. */
export class CanceledError extends BrokerError {}
/** `denied` 403: refused by policy (or a quota: a create over the tenant's quota). */
export class DeniedError extends BrokerError {}
/** `too_large` 413: a body over its limit, or a full disk. */
export class TooLargeError extends BrokerError {}
/** `unavailable` 503: a backend cannot be reached, or the broker is shutting down. */
export class UnavailableError extends BrokerError {}
/** `internal` 500: anything else. */
export class InternalError extends BrokerError {}
/** `unauthorized` 401: a missing, malformed or unknown bearer token. */
export class UnauthorizedError extends BrokerError {}
/** `not_found` 404: an unknown workspace, tool or route. */
export class NotFoundError extends BrokerError {}
/** `method_not_allowed` 405. */
export class MethodNotAllowedError extends BrokerError {}
/** `unsupported_media_type` 415. */
export class UnsupportedMediaTypeError extends BrokerError {}
/** `bad_request` 400: a body that is not the JSON the route expects. */
export class BadRequestError extends BrokerError {}
/** `too_many_requests` 429: the tenant is over its rate or concurrent calls. */
export class TooManyRequestsError extends BrokerError {
	/** Seconds the broker asked to wait (Retry-After), when it said. */
	retryAfter?: number;
}
/** `misdirected_request` 421: a Host the broker does not answer for. */
export class MisdirectedRequestError extends BrokerError {}

type BrokerErrorClass = new (code: string, status: number, detail: string, requestId?: string) => BrokerError;

/** The wire's error table: each code with its status and class, in wire.Codes order. */
export const ERROR_CODES: ReadonlyArray<{ name: string; status: number; cls: BrokerErrorClass }> = [
	{ name: "unauthorized", status: 401, cls: UnauthorizedError },
	{ name: "not_found", status: 404, cls: NotFoundError },
	{ name: "method_not_allowed", status: 405, cls: MethodNotAllowedError },
	{ name: "unsupported_media_type", status: 415, cls: UnsupportedMediaTypeError },
	{ name: "bad_request", status: 400, cls: BadRequestError },
	{ name: "too_many_requests", status: 429, cls: TooManyRequestsError },
	{ name: "misdirected_request", status: 421, cls: MisdirectedRequestError },
	{ name: "not_exist", status: 404, cls: NotExistError },
	{ name: "exists", status: 409, cls: ExistsError },
	{ name: "permission", status: 403, cls: PermissionError },
	{ name: "is_dir", status: 409, cls: IsDirError },
	{ name: "not_dir", status: 409, cls: NotDirError },
	{ name: "invalid", status: 400, cls: InvalidError },
	{ name: "timeout", status: 504, cls: TimeoutError },
	{ name: "canceled", status: 499, cls: CanceledError },
	{ name: "denied", status: 403, cls: DeniedError },
	{ name: "too_large", status: 413, cls: TooLargeError },
	{ name: "unavailable", status: 503, cls: UnavailableError },
	{ name: "internal", status: 500, cls: InternalError },
];

// The opsapi kinds come first for a bare status, as client.ToNative reads it:
// a 404 without a code is not_exist, a 409 exists, a 403 permission.
const byStatusOrder = [...ERROR_CODES.slice(7), ...ERROR_CODES.slice(0, 7)];

/**
 * The error for a problem answer: the class of its code, or, for a code
 * this SDK does not know (a newer broker), of its status; a BrokerError
 * keeping the code otherwise.
 */
export function errorFor(code: string | undefined, status: number, detail: string, requestId?: string): BrokerError {
	const known = code ? ERROR_CODES.find((c) => c.name === code) : undefined;
	if (known) return new known.cls(known.name, status, detail, requestId);
	const byStatus = byStatusOrder.find((c) => c.status === status);
	if (byStatus) return new byStatus.cls(code ?? byStatus.name, status, detail, requestId);
	return new BrokerError(code ?? "internal", status, detail, requestId);
}

/**
 * The connection to the broker failed before a whole answer came. For a
 * read the SDK has already retried once; for a mutation (a write, a start,
 * an exec) it never retries: whether the broker did it is unknown.
 */
export class ConnectionError extends Error {
	constructor(
		message: string,
		/** Whether the call was a mutation, so it may have happened. */
		readonly mutation: boolean,
		options?: { cause?: unknown },
	) {
		super(message, options);
		this.name = "ConnectionError";
	}
}

/** The caller's AbortSignal ended the call (an exec's command was killed with its tree). */
export class AbortError extends Error {
	constructor(message = "the operation was aborted", options?: { cause?: unknown }) {
		super(message, options);
		this.name = "AbortError";
	}
}
