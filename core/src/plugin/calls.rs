//! A tool's calls: in this process through the FFI, or in its worker process.

use std::future::Future;
use std::pin::Pin;

use plugin_abi::wire::FfiTool;
use plugin_abi::{FfiContext, FfiFuture, FfiResponse, FfiResult, RString};
use plugin_api::{Response, ToolError};

use crate::isolation::protocol::{Op, Outcome, WireResponse};
use crate::isolation::IsolatedTool;

use super::{settle, Backend, PluginAnswer, ToolHandle};

/// A tool's own hook (`before_execution` or `after_execution`) through the FFI: `None` when
/// the tool has none.
type Hook<A> = fn(&FfiTool, FfiContext, A) -> Option<FfiFuture<FfiResult<()>>>;

impl ToolHandle {
    pub(crate) fn has_before_hook(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.has_before_execution(),
            Backend::Worker(isolated, _) => isolated.hello.before_hook,
        }
    }

    pub(crate) fn has_after_hook(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.has_after_execution(),
            Backend::Worker(isolated, _) => isolated.hello.after_hook,
        }
    }

    pub(crate) fn has_readiness(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.has_readiness(),
            Backend::Worker(isolated, _) => isolated.hello.readiness,
        }
    }

    /// Runs `op` in the tool's worker, with no deadline (the hooks, and `execute_bare`).
    /// Boxed: its state (a round trip to another process) would otherwise make the future of
    /// every in-process call larger too.
    fn in_worker<'a>(
        &'a self,
        isolated: &'a IsolatedTool,
        op: Op,
        ctx: FfiContext,
    ) -> Pin<Box<dyn Future<Output = Result<Option<WireResponse>, ToolError>> + Send + 'a>> {
        Box::pin(async move {
            match isolated.call_to_end(&self.name, op, ctx).await? {
                Outcome::Response(response) => Ok(Some(response)),
                _ => Ok(None),
            }
        })
    }

    /// Runs `execute` with the call's context `ctx`, in this process or in the tool's worker.
    pub(crate) async fn execute(
        &self,
        ctx: FfiContext,
        args: String,
    ) -> Result<PluginAnswer, ToolError> {
        match &self.backend {
            Backend::InProcess { .. } => self.execute_ffi(ctx, args).await,
            Backend::Worker(isolated, _) => {
                let answer = self.in_worker(isolated, Op::Execute(args), ctx).await?;
                Ok(PluginAnswer::from_wire(answer.unwrap_or_default()))
            }
        }
    }

    /// `execute` in this process with a context of any host (the worker's, in a worker).
    pub(crate) fn execute_ffi(
        &self,
        ctx: FfiContext,
        args: String,
    ) -> impl Future<Output = Result<PluginAnswer, ToolError>> + Send + 'static + use<> {
        let fut = self
            .backend
            .in_process()
            .map(|ffi| ffi.execute(ctx, RString::from(args)));
        async move {
            match fut {
                Some(fut) => settle(fut).await.map(|r| PluginAnswer(r, 0)),
                None => Err(ToolError::internal("not an in-process tool")),
            }
        }
    }

    pub(crate) async fn before_execution(
        &self,
        ctx: FfiContext,
        args: String,
    ) -> Result<(), ToolError> {
        match &self.backend {
            Backend::InProcess { .. } => self.before_ffi(ctx, args).await,
            Backend::Worker(isolated, _) => self
                .in_worker(isolated, Op::Before(args), ctx)
                .await
                .map(drop),
        }
    }

    /// The tool's own `before_execution` in this process, with a context of any host.
    pub(crate) fn before_ffi(
        &self,
        ctx: FfiContext,
        args: String,
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'static + use<> {
        self.hook_ffi(ctx, RString::from(args), FfiTool::before_execution)
    }

    pub(crate) async fn after_execution(
        &self,
        ctx: FfiContext,
        response: &Response,
    ) -> Result<(), ToolError> {
        let response = FfiResponse::from(response.clone());
        match &self.backend {
            Backend::InProcess { .. } => self.after_ffi(ctx, response).await,
            Backend::Worker(isolated, _) => {
                let op = Op::After(response.into());
                self.in_worker(isolated, op, ctx).await.map(drop)
            }
        }
    }

    /// The tool's own `after_execution` in this process, with a context of any host.
    pub(crate) fn after_ffi(
        &self,
        ctx: FfiContext,
        response: FfiResponse,
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'static + use<> {
        self.hook_ffi(ctx, response, FfiTool::after_execution)
    }

    /// One of the tool's own hooks in this process: `hook` starts it, or finds none (and
    /// drops the context, giving its reference back); no hook, or a tool in a worker, is `Ok`.
    fn hook_ffi<A>(
        &self,
        ctx: FfiContext,
        arg: A,
        hook: Hook<A>,
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'static + use<A> {
        let fut = self
            .backend
            .in_process()
            .and_then(|ffi| hook(ffi, ctx, arg));
        async move {
            match fut {
                Some(fut) => settle(fut).await,
                None => Ok(()),
            }
        }
    }
}
