//! One MCP session (a stdio connection, or an HTTP session or request): the handler rmcp
//! drives. rmcp negotiates the version: a client of 2025-11-25 or earlier starts with
//! `initialize` and keeps its session; a client of 2026-07-28 sends `server/discover` (or
//! nothing) and its version, name and capabilities in each request's `_meta`, and each of its
//! requests stands alone (approvals and a tool's questions as `InputRequiredResult`s, changes
//! on `subscriptions/listen`, caching hints on lists).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

#[allow(deprecated)] // logging/setLevel is what clients before 2026-07-28 send
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CompletionInfo,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, Reference, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::model::{
    CallToolResult, CancelTaskParams, ContentBlock, CreateTaskResult, GetTaskParams, GetTaskResult,
    UpdateTaskParams,
};
use rmcp::model::{DiscoverResult, SubscriptionFilter};
use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListSkillsResult, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData, ServerHandler};

use super::asker::{LogThreshold, TaskQuestions};
use super::round_trip::{self, RoundTrip, StateKey, APPROVAL};
use super::skills;
use super::{
    approval, cache_hints, call, listen, lock, prompts, resources, telemetry, tools, Shared,
};
use tokio_util::sync::CancellationToken;

mod as_task;
mod build;
mod call_tool;
mod input_first;
mod prompt_args;

/// The handler of one session. Cheap to make: the host and the clients are shared.
#[derive(Clone)]
pub(crate) struct Session {
    shared: Arc<Shared>,
    /// The tools approved "for this session".
    approved: Arc<Mutex<HashSet<String>>>,
    /// Why the client cannot be asked for approvals on this transport, if it cannot.
    no_approvals: Option<&'static str>,
    /// The least severe level of the log messages the client wants (`logging/setLevel`).
    log_threshold: Arc<LogThreshold>,
    /// The resources the client subscribed to (`resources/subscribe`).
    subscriptions: Arc<Mutex<HashSet<String>>>,
    /// The key derived from the HTTP listener's token, if it has one (else the server's
    /// random key seals `requestState`).
    token_key: Option<Arc<StateKey>>,
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // logging: what clients before 2026-07-28 use
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts_list_changed()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tasks()
            .enable_skills_with_directory_read()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "The native tools of toolhost profile '{}'.",
                self.shared.profile
            ))
    }

    /// The tool `name` as listed, for rmcp's check of a call's `Mcp-Param-*` headers against
    /// the `x-mcp-header` parameters of its schema (SEP-2243); `None` for a name no layer
    /// has (the call then says so).
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        toolhost::ToolName::parse(name).ok()?;
        let resolution = self.shared.host.resolve(&self.shared.profile, name);
        let found = resolution.found.as_ref()?;
        Some(tools::tool(name, found.handle.info()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let served = telemetry::Request::new("tools/list", None, &context);
        served
            .serve(async move {
                let mut listed = self.blocking("listing the tools", tools::list).await?;
                if self.shared.is_read_only() {
                    listed.retain(tools::is_read);
                }
                let mut result = ListToolsResult::with_all_items(listed);
                if let Some((ttl, scope)) = self.list_hints(&context) {
                    (result.ttl_ms, result.cache_scope) = (Some(ttl), Some(scope));
                }
                Ok(result)
            })
            .await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let label = toolhost::telemetry::metrics::enabled()
            .then(|| tools::metric_label(&self.shared.host, &self.shared.profile, &request.name));
        let served =
            telemetry::Request::new("tools/call", Some(&*request.name), &context).for_tool(label);
        served.serve_call(self.serve_call(request, context)).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let served = telemetry::Request::new("tasks/get", None, &context);
        served
            .serve(async move {
                self.shared
                    .tasks
                    .get(&request.task_id)
                    .map(GetTaskResult::new)
            })
            .await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let served = telemetry::Request::new("tasks/update", None, &context);
        served
            .serve(async move {
                let UpdateTaskParams {
                    task_id,
                    input_responses,
                    ..
                } = request;
                self.shared.tasks.update(&task_id, input_responses)?;
                Ok(())
            })
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let served = telemetry::Request::new("tasks/cancel", None, &context);
        served
            .serve(async move { self.shared.tasks.cancel(&request.task_id) })
            .await
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let served = telemetry::Request::new("server/discover", None, &context);
        served
            .serve(async move {
                let versions = ServerHandler::supported_protocol_versions(self).into_owned();
                let (ttl, scope) = cache_hints::list(self.token_key.is_some());
                Ok(DiscoverResult::from_server_info(versions, self.get_info())
                    .with_ttl_ms(ttl)
                    .with_cache_scope(scope))
            })
            .await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(listen::accepted(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        listen::listen(&self.shared.peers, context).await
    }

    #[allow(deprecated)] // logging/setLevel is what clients before 2026-07-28 send
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let served = telemetry::Request::new("logging/setLevel", None, &context);
        served
            .serve(async move {
                self.log_threshold.set(request.level);
                Ok(())
            })
            .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let served = telemetry::Request::new("prompts/list", None, &context);
        served
            .serve(async move {
                let listed = self.blocking("listing the prompts", prompts::list).await?;
                let mut result = ListPromptsResult::with_all_items(listed);
                if let Some((ttl, scope)) = self.list_hints(&context) {
                    (result.ttl_ms, result.cache_scope) = (Some(ttl), Some(scope));
                }
                Ok(result)
            })
            .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let served = telemetry::Request::new("prompts/get", Some(&*request.name), &context);
        served
            .serve(async move {
                let mut request = request;
                if cache_hints::is_stateless(&context) {
                    let asked = self.ask_for_arguments(&mut request, &context).await?;
                    if let Some(asked) = asked {
                        return Ok(asked.into());
                    }
                }
                let secrets = self.shared.host.secrets();
                let got = self
                    .blocking("reading the prompt", move |host, profile| {
                        prompts::get(host, profile, &request)
                    })
                    .await??;
                let json = serde_json::to_value(&got).unwrap_or_default();
                let masked = secrets.mask_value(json).into_inner();
                let mut got: rmcp::model::GetPromptResult = serde_json::from_value(masked)
                    .map_err(|e| {
                        ErrorData::internal_error(format!("the prompt's masked form: {e}"), None)
                    })?;
                // 2026-07-28 results say they are complete (rmcp strips it for older peers).
                got.result_type = Some(rmcp::model::ResultType::COMPLETE);
                Ok(GetPromptResponse::from(got))
            })
            .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let served = telemetry::Request::new("resources/list", None, &context);
        served
            .serve(async move {
                let mut listed = self
                    .blocking("listing the resources", resources::list)
                    .await?;
                let skills = self
                    .blocking("listing the skills", skills::manifests)
                    .await?;
                listed.extend(skills);
                let mut result = ListResourcesResult::with_all_items(listed);
                if let Some((ttl, scope)) = self.list_hints(&context) {
                    (result.ttl_ms, result.cache_scope) = (Some(ttl), Some(scope));
                }
                Ok(result)
            })
            .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let served = telemetry::Request::new("resources/templates/list", None, &context);
        served
            .serve(async move {
                let listed = self
                    .blocking("listing the resource templates", resources::templates)
                    .await?;
                let mut result = ListResourceTemplatesResult::with_all_items(listed);
                if let Some((ttl, scope)) = self.list_hints(&context) {
                    (result.ttl_ms, result.cache_scope) = (Some(ttl), Some(scope));
                }
                Ok(result)
            })
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let served = telemetry::Request::new("resources/read", None, &context);
        served
            .serve(async move {
                let uri = request.uri.clone();
                let mut read = self
                    .blocking("reading the resource", move |host, profile| {
                        match skills::is_skill_uri(&uri) {
                            true => skills::read(host, profile, &uri),
                            false => resources::read(host, profile, &uri),
                        }
                    })
                    .await??;
                read.result_type = Some(rmcp::model::ResultType::COMPLETE);
                if cache_hints::is_stateless(&context) {
                    let (ttl, scope) = cache_hints::read();
                    (read.ttl_ms, read.cache_scope) = (Some(ttl), Some(scope));
                }
                Ok(ReadResourceResponse::from(read))
            })
            .await
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let served = telemetry::Request::new("skills/list", None, &context);
        served
            .serve(async move {
                let listed = self.blocking("listing the skills", skills::list).await?;
                let mut result = ListSkillsResult::with_all_items(listed);
                if let Some((ttl, scope)) = self.list_hints(&context) {
                    (result.ttl_ms, result.cache_scope) = (Some(ttl), Some(scope));
                }
                Ok(result)
            })
            .await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let served = telemetry::Request::new("skills/get", None, &context);
        served
            .serve(async move {
                let uri = request.uri.clone();
                let skill = self
                    .blocking("reading the skill", move |host, profile| {
                        skills::get(host, profile, &uri)
                    })
                    .await??;
                let mut result = GetSkillResult::new(skill);
                if let Some((ttl, scope)) = self.list_hints(&context) {
                    result = result.with_ttl_ms(ttl).with_cache_scope(scope);
                }
                Ok(result)
            })
            .await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        let served = telemetry::Request::new("resources/directory/read", None, &context);
        served
            .serve(async move {
                let uri = request.uri.clone();
                let children = self
                    .blocking("reading the folder", move |host, profile| {
                        skills::directory(host, profile, &uri)
                    })
                    .await??;
                let mut result = ReadResourceDirectoryResult::with_all_items(children);
                if let Some((ttl, scope)) = self.list_hints(&context) {
                    (result.ttl_ms, result.cache_scope) = (Some(ttl), Some(scope));
                }
                Ok(result)
            })
            .await
    }

    #[allow(deprecated)] // resources/subscribe is what clients before 2026-07-28 send
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let served = telemetry::Request::new("resources/subscribe", None, &context);
        served
            .serve(async move {
                let uri = request.uri.clone();
                let known = self
                    .blocking("finding the resource", move |host, profile| {
                        resources::exists(host, profile, &uri)
                    })
                    .await?;
                if !known {
                    return Err(resources::not_found(&request.uri));
                }
                lock(&self.subscriptions).insert(request.uri);
                Ok(())
            })
            .await
    }

    #[allow(deprecated)] // resources/unsubscribe is what clients before 2026-07-28 send
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let served = telemetry::Request::new("resources/unsubscribe", None, &context);
        served
            .serve(async move {
                lock(&self.subscriptions).remove(&request.uri);
                Ok(())
            })
            .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let served = telemetry::Request::new("completion/complete", None, &context);
        served
            .serve(async move {
                let values = self
                    .blocking("completing", move |host, profile| {
                        let (name, value) = (&request.argument.name, &request.argument.value);
                        match &request.r#ref {
                            Reference::Prompt(prompt) => {
                                prompts::complete(host, profile, &prompt.name, name, value)
                            }
                            Reference::Resource(resource) => {
                                resources::complete(host, profile, &resource.uri, name, value)
                            }
                            #[allow(unreachable_patterns)]
                            _ => Vec::new(),
                        }
                    })
                    .await?;
                let completion = CompletionInfo::with_all_values(values)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(CompleteResult::new(completion))
            })
            .await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared
            .peers
            .add(context.peer, self.subscriptions.clone());
    }
}
