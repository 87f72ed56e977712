// `export_tool!(T)` where `T` has no `Default`: the fix is `export_tool!(T = T::new(...))`.

use plugin_api::{Args, Context, Response, Tool, ToolError};

struct NoDefault {
    greeting: String,
}

impl Tool for NoDefault {
    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        Ok(Response::text(self.greeting.clone()))
    }
}

plugin_api::export_tool!(NoDefault);

fn main() {}
