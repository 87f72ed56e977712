// `export_extension!` on a type that implements `Tool` but not `Extension`.

use plugin_api::{Args, Context, Response, Tool, ToolError};

#[derive(Default)]
struct OnlyATool;

impl Tool for OnlyATool {
    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        Ok(Response::text("hi"))
    }
}

plugin_api::export_extension!(OnlyATool);

fn main() {}
