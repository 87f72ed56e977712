// `export_tool!` on a type that does not implement `Tool`.

#[derive(Default)]
struct NotATool;

plugin_api::export_tool!(NotATool);

fn main() {}
