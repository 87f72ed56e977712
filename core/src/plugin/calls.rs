//! A tool's calls: in this process through the FFI, or in its worker process.

use std::sync::Arc;

use std::future::Future;
use std::pin::Pin;

use abi_stable::std_types::RString;
use plugin_api::__private::abi::response_to_ffi;
use plugin_api::__private::abi::{FfiContext, FfiResponse};
use plugin_api::{Response, ToolError};

use crate::exec::context::CallContext;
use crate::isolation::protocol::{Op, Outcome, WireResponse};
use crate::isolation::IsolatedTool;

use super::{settle, Backend, PluginAnswer, ToolHandle};

impl ToolHandle {
    pub(crate) fn has_before_hook(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.vtable.before_execution().is_some(),
            Backend::Worker(isolated, _) => isolated.hello.before_hook,
        }
    }

    pub(crate) fn has_after_hook(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.vtable.after_execution().is_some(),
            Backend::Worker(isolated, _) => isolated.hello.after_hook,
        }
    }

    pub(crate) fn has_readiness(&self) -> bool {
        match &self.backend {
            Backend::InProcess { ffi, .. } => ffi.vtable.readiness().is_some(),
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
        ctx: &'a Arc<CallContext>,
    ) -> Pin<Box<dyn Future<Output = Result<Option<WireResponse>, ToolError>> + Send + 'a>> {
        Box::pin(async move {
            match isolated.call_to_end(&self.name, op, ctx).await? {
                Outcome::Response(response) => Ok(Some(response)),
                _ => Ok(None),
            }
        })
    }

    pub(crate) async fn execute(
        &self,
        ctx: &Arc<CallContext>,
        args: String,
    ) -> Result<PluginAnswer, ToolError> {
        match &self.backend {
            Backend::InProcess { .. } => self.execute_ffi(ctx.to_ffi(), args).await,
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
    ) -> impl Future<Output = Result<PluginAnswer, ToolError>> + Send + 'static {
        let fut = match &self.backend {
            // SAFETY: `this` is ours until drop; the context reference is handed over.
            Backend::InProcess { ffi, .. } => {
                Some(unsafe { (ffi.vtable.execute())(ffi.this, ctx, RString::from(args)) })
            }
            Backend::Worker(..) => None,
        };
        async move {
            match fut {
                Some(fut) => settle(fut).await.map(PluginAnswer),
                None => Err(ToolError::internal("not an in-process tool")),
            }
        }
    }

    pub(crate) async fn before_execution(
        &self,
        ctx: &Arc<CallContext>,
        args: String,
    ) -> Result<(), ToolError> {
        match &self.backend {
            Backend::InProcess { .. } => self.before_ffi(ctx.to_ffi(), args).await,
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
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'static {
        let hook = match &self.backend {
            Backend::InProcess { ffi, .. } => ffi
                .vtable
                .before_execution()
                .into_option()
                .map(|hook| (hook, ffi.this)),
            Backend::Worker(..) => None,
        };
        // SAFETY: as in `execute_ffi`; without a hook the reference is given back.
        let fut = match hook {
            Some((hook, this)) => Some(unsafe { hook(this, ctx, RString::from(args)) }),
            None => {
                drop(unsafe { plugin_api::__private::abi::context_from_ffi(ctx) });
                None
            }
        };
        async move {
            match fut {
                Some(fut) => settle(fut).await,
                None => Ok(()),
            }
        }
    }

    pub(crate) async fn after_execution(
        &self,
        ctx: &Arc<CallContext>,
        response: &Response,
    ) -> Result<(), ToolError> {
        let response = response_to_ffi(response.clone());
        match &self.backend {
            Backend::InProcess { .. } => self.after_ffi(ctx.to_ffi(), response).await,
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
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'static {
        let hook = match &self.backend {
            Backend::InProcess { ffi, .. } => ffi
                .vtable
                .after_execution()
                .into_option()
                .map(|hook| (hook, ffi.this)),
            Backend::Worker(..) => None,
        };
        // SAFETY: as in `execute_ffi`; without a hook the reference is given back.
        let fut = match hook {
            Some((hook, this)) => Some(unsafe { hook(this, ctx, response) }),
            None => {
                drop(unsafe { plugin_api::__private::abi::context_from_ffi(ctx) });
                None
            }
        };
        async move {
            match fut {
                Some(fut) => settle(fut).await,
                None => Ok(()),
            }
        }
    }
}
