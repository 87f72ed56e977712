//! The attribute names of the spans, as OpenTelemetry's GenAI and MCP semantic conventions
//! define them (still in development status upstream, so kept here as the project's own
//! constants), and the project's own (`toolhost.*`).

/// The operation: `execute_tool` for a tool call.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The tool's name.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// The id of the call (the model's tool call id, or the MCP request's id).
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// The kind of error a failed call ended with (`repairable`, `timeout`, …).
pub const ERROR_TYPE: &str = "error.type";
/// The MCP method of a request (`tools/call`, `tools/list`, …).
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// The name in `mcp.json` of the MCP server a request is sent to.
pub const MCP_SERVER: &str = "toolhost.mcp.server";
/// The JSON-RPC id of an MCP request.
pub const MCP_REQUEST_ID: &str = "mcp.request.id";
/// The id of an MCP task (the tasks extension) whose run a span covers.
pub const TASK_ID: &str = "toolhost.task.id";

/// The operation name of a tool call's span.
pub const EXECUTE_TOOL: &str = "execute_tool";

/// The method of a `name:method` call.
pub const TOOL_METHOD: &str = "toolhost.tool.method";
/// The layer the tool's library was found in (`usr`, `plugins/NAME`, `core`, a profile's
/// `agents/NAME`), or `mcp` for an MCP server's tool.
pub const TOOL_LAYER: &str = "toolhost.tool.layer";
/// The SHA-256 of the library file that served the call.
pub const LIBRARY_SHA256: &str = "toolhost.library.sha256";
/// The tool's declared risk level (`read`, `write`, `exec`).
pub const TOOL_RISK: &str = "toolhost.tool.risk";
/// Whether the tool ran in a worker process.
pub const TOOL_ISOLATED: &str = "toolhost.tool.isolated";
/// How the call ended: `ok` or `error`.
pub const CALL_OUTCOME: &str = "toolhost.call.outcome";
/// Which attempt a plugin's `execute` span is (1 for the first, one more per retry).
pub const ATTEMPT: &str = "toolhost.attempt";

/// The process id of the worker that ran a plugin's part of a call.
pub const WORKER_PID: &str = "toolhost.worker.pid";
/// The model a chat request asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// The tokens of a chat request's input (prompt).
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// The tokens of a chat request's output (completion).
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// The operation name of a model request's span.
pub const CHAT: &str = "chat";
/// The key of the `_meta` of an MCP request that carries the trace context.
pub const META_TRACEPARENT: &str = "traceparent";

// The metrics (`metrics.rs`). OpenTelemetry names; `/metrics` shows each as Prometheus does
// (dots as `_`, the unit appended, `_total` on counters): `toolhost.tool.calls` is
// `toolhost_tool_calls_total` there.

/// Tool calls (counter), by [`GEN_AI_TOOL_NAME`] and [`CALL_OUTCOME`].
pub const METRIC_TOOL_CALLS: &str = "toolhost.tool.calls";
/// Failed tool calls (counter), by [`GEN_AI_TOOL_NAME`] and [`ERROR_TYPE`].
pub const METRIC_TOOL_FAILURES: &str = "toolhost.tool.failures";
/// How long tool calls took, in seconds (histogram), by [`GEN_AI_TOOL_NAME`].
pub const METRIC_TOOL_CALL_DURATION: &str = "toolhost.tool.call.duration";
/// Library events (counter), by [`RELOAD_EVENT`].
pub const METRIC_RELOADS: &str = "toolhost.reloads";
/// MCP requests served (counter), by [`MCP_METHOD_NAME`].
pub const METRIC_MCP_REQUESTS: &str = "toolhost.mcp.requests";
/// How long MCP requests took to serve, in seconds (histogram), by [`MCP_METHOD_NAME`],
/// [`GEN_AI_TOOL_NAME`] for `tools/call`, and [`ERROR_TYPE`] when one failed (the JSON-RPC
/// error code, or `tool_error` for a result with `isError`), as the MCP semantic conventions
/// name it.
pub const METRIC_MCP_SERVER_OPERATION_DURATION: &str = "mcp.server.operation.duration";
/// MCP sessions started under `serve-mcp --http --sessions` (counter).
pub const METRIC_MCP_SESSIONS_STARTED: &str = "toolhost.mcp.sessions.started";
/// MCP sessions open now under `serve-mcp --http --sessions` (up-down counter): up on
/// `initialize`, down when a session is deleted or expires.
pub const METRIC_MCP_SESSIONS_OPEN: &str = "toolhost.mcp.sessions.open";
/// A tool's circuit breaker (gauge: 0 closed, 1 half open, 2 open), by [`GEN_AI_TOOL_NAME`].
pub const METRIC_BREAKER_STATE: &str = "toolhost.breaker.state";
/// Approval decisions (counter), by [`APPROVAL_DECISION`].
pub const METRIC_APPROVALS: &str = "toolhost.approvals";
/// Counter: measurements whose tool name was recorded as `unknown` because the bound on
/// distinct tool names ([`MAX_TOOL_LABELS`](super::metrics::MAX_TOOL_LABELS)) was reached.
pub const METRIC_DROPPED_LABELS: &str = "toolhost.metrics.labels.dropped";
/// The GenAI conventions' token histogram: the tokens of each model request, by
/// [`GEN_AI_OPERATION_NAME`], [`GEN_AI_REQUEST_MODEL`] and [`GEN_AI_TOKEN_TYPE`].
pub const METRIC_GEN_AI_TOKEN_USAGE: &str = "gen_ai.client.token.usage";

/// Which tokens a [`METRIC_GEN_AI_TOKEN_USAGE`] measurement counts: `input` or `output`.
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
/// A library event: `loaded`, `reloaded`, `removed` or `failed`.
pub const RELOAD_EVENT: &str = "toolhost.reload.event";
/// An approval's decision: `allowed` or `denied`.
pub const APPROVAL_DECISION: &str = "toolhost.approval.decision";
