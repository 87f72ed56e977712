//! `test_embedded_resource`: returns an embedded text resource. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Content, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

#[derive(Default)]
struct TestEmbeddedResource;

impl Tool for TestEmbeddedResource {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Returns an embedded text resource.").risk(RiskLevel::Read)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let resource = Content::resource_text(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        );
        Ok(Response::text("").with_content(resource))
    }
}

plugin_api::export_tool!(TestEmbeddedResource);
