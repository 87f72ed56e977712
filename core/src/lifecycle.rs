//! The fixed lifecycle of one tool call (design section 4).

use std::sync::Arc;

use abi_stable::std_types::RString;
use plugin_api::points::{TOOL_EXECUTE_AFTER, TOOL_EXECUTE_BEFORE, TOOL_OUTPUT_UPDATE};
use serde_json::{json, Map, Value};

use crate::agent::{nice_key, sanitize, HistoryMessage, Role};
use crate::context::CallContext;
use crate::output::OutputKind;
use crate::plugin::ToolHandle;
use crate::{Agent, Response, ToolError, ToolName};

/// The tool a request resolved to.
enum Target {
    Library(Arc<ToolHandle>),
    /// No layer has the tool: the built-in Unknown tool answers.
    Unknown,
}

impl Agent {
    /// Calls a tool through the whole lifecycle and returns its response.
    ///
    /// `request` is `name` or `name:method`; `args` is the JSON object of arguments (`null` is
    /// taken as `{}`). In order: resolve (the first layer with a loadable `tools/<name>` library,
    /// else a library named `unknown`, else the built-in Unknown tool) and remember it as the
    /// current tool; intervention check; `before_execution`; intervention check;
    /// `tool_execute_before` extensions (may change the arguments); `execute`; intervention
    /// check; `tool_execute_after` extensions (may change the message, not `break_loop`);
    /// `after_execution`; intervention check; finally clear the current tool.
    ///
    /// An invalid name is refused with a repairable error before any file is touched.
    pub async fn call_tool(
        self: &Arc<Self>,
        request: &str,
        args: Value,
    ) -> Result<Response, ToolError> {
        let request_name = ToolName::parse(request)?;
        let args = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::repairable(format!(
                    "the arguments of tool '{request}' must be a JSON object, not {other}"
                )))
            }
        };
        let name = request_name.name();
        let target = match self.host.resolve(self.profile(), name).found {
            Some(found) => Target::Library(found.handle),
            None => match self.host.resolve(self.profile(), "unknown").found {
                Some(found) => Target::Library(found.handle),
                None => Target::Unknown,
            },
        };
        self.set_current_tool(Some(request));
        let result = self.run_lifecycle(&request_name, target, args).await;
        self.set_current_tool(None);
        result
    }

    async fn run_lifecycle(
        self: &Arc<Self>,
        request: &ToolName,
        target: Target,
        args: Map<String, Value>,
    ) -> Result<Response, ToolError> {
        self.check_intervention().await?;
        let heading = match request.method() {
            Some(method) => format!("Using tool '{}:{method}'", request.name()),
            None => format!("Using tool '{}'", request.name()),
        };
        let log_id = self.new_log_item(heading, args.clone());
        let call = Arc::new(CallContext {
            agent: self.clone(),
            tool_name: request.name().into(),
            method: request.method().map(Into::into),
            log_id,
            extension: None,
        });
        let mut args = Value::Object(args);

        match &target {
            Target::Library(tool) if tool.has_before_hook() => {
                tool.before_execution(&call, args.to_string()).await?
            }
            _ => self.default_before_execution(&call, &args),
        }
        self.check_intervention().await?;

        let data = json!({"tool_name": request.name(), "args": args});
        let mut data = self
            .run_extensions(TOOL_EXECUTE_BEFORE, data, &call)
            .await?;
        args = match data.get_mut("args").map(Value::take) {
            Some(Value::Object(map)) => Value::Object(map),
            _ => Value::Object(Map::new()),
        };

        let mut response = match &target {
            Target::Library(tool) => tool.execute(&call, args.to_string()).await?,
            Target::Unknown => self.unknown_tool(request.name()),
        };
        self.check_intervention().await?;

        let break_loop = response.break_loop;
        let data = json!({"tool_name": request.name(), "response": {
            "message": response.message,
            "break_loop": response.break_loop,
            "additional": response.additional,
        }});
        let data = self.run_extensions(TOOL_EXECUTE_AFTER, data, &call).await?;
        if let Some(message) = data.pointer("/response/message").and_then(Value::as_str) {
            if message != response.message {
                response.message = message.to_owned();
            }
        }
        if let Some(Value::Object(additional)) = data.pointer("/response/additional") {
            response.additional = Some(additional.clone());
        }
        response.break_loop = break_loop; // extensions must not change it

        match &target {
            Target::Library(tool) if tool.has_after_hook() => {
                tool.after_execution(&call, &response).await?
            }
            _ => self.default_after_execution(&call, &response),
        }
        self.check_intervention().await?;
        Ok(response)
    }

    /// Runs every extension of `point` in order, each on the data the previous one left.
    /// The data is serialised once and parsed again only if an extension changed it.
    async fn run_extensions(
        self: &Arc<Self>,
        point: &str,
        data: Value,
        call: &Arc<CallContext>,
    ) -> Result<Value, ToolError> {
        let extensions = self.host.extensions(self.profile(), point);
        if extensions.is_empty() {
            return Ok(data);
        }
        let mut text = RString::from(data.to_string());
        let mut changed = false;
        for ext in extensions.iter() {
            let ctx = call.for_extension(&ext.point, &ext.name);
            match ext.execute(&ctx, text.clone()).await {
                Ok(Some(new)) => {
                    text = new;
                    changed = true;
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(ToolError::new(
                        e.kind(),
                        format!("extension '{}' at {point}: {}", ext.name, e.message()),
                    ))
                }
            }
        }
        if !changed {
            return Ok(data);
        }
        serde_json::from_str(&text).map_err(|e| {
            ToolError::internal(format!("an extension at {point} left invalid JSON: {e}"))
        })
    }

    /// Sets a call's progress and fires `tool_output_update`.
    pub(crate) async fn set_progress(
        self: Arc<Self>,
        call: &Arc<CallContext>,
        text: String,
    ) -> Result<(), ToolError> {
        let data = json!({"tool_name": &*call.tool_name, "progress": text});
        let data = self.run_extensions(TOOL_OUTPUT_UPDATE, data, call).await?;
        let text = data
            .get("progress")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.print(OutputKind::Progress, || format!("  ... {text}"));
        self.update_log(call.log_id, |item| item.progress = text);
        Ok(())
    }

    /// The default `before_execution`: prints the call and its arguments.
    pub(crate) fn default_before_execution(&self, call: &CallContext, args: &Value) {
        self.print(OutputKind::ToolUse, || {
            format!("{}: Using tool '{}'", self.name(), call.tool_name)
        });
        if let Value::Object(map) = args {
            for (key, value) in map {
                self.print(OutputKind::Argument, || {
                    let value = value
                        .as_str()
                        .map_or_else(|| value.to_string(), str::to_owned);
                    format!("  {}: {value}", nice_key(key))
                });
            }
        }
    }

    /// The default `after_execution`: records the sanitised result in history and the log.
    pub(crate) fn default_after_execution(&self, call: &CallContext, response: &Response) {
        let text = sanitize(response.message.trim());
        self.print(OutputKind::ToolResponse, || {
            format!(
                "{}: Response from tool '{}':\n{text}",
                self.name(),
                call.tool_name
            )
        });
        self.update_log(call.log_id, |item| {
            item.content = text.clone();
            item.finished = true;
        });
        self.add_history(HistoryMessage {
            role: Role::Tool,
            content: text,
            tool_name: Some(call.tool_name.to_string()),
            additional: response.additional.clone(),
        });
    }

    /// The built-in Unknown tool: names the missing tool and lists the available ones.
    fn unknown_tool(&self, name: &str) -> Response {
        Response::text(format!(
            "Tool {name} not found. Available tools:\n{}",
            self.host.tools_prompt(self.profile())
        ))
    }
}
