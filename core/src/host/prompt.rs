//! The system prompt: prompt fragments merged across the layers, and the tools section.

use std::collections::{BTreeMap, HashSet};

use super::Host;
use crate::config::Access;
use crate::layout::{prompt_files, read_text, Escaped};
use crate::model::ToolSpec;
use plugin_api::ToolInfo;

/// The file-name prefix of a tool's prompt fragment: `agent.system.tool.<name>.md`.
const TOOL_FRAGMENT: &str = "agent.system.tool.";

impl Host {
    /// The prompt fragments `prompts/agent.system.tool.<name>.md` of every layer, merged by file
    /// name (first occurrence wins) and sorted by file name: `(file name, text)`.
    pub fn prompt_fragments(&self, profile: &str) -> Vec<(String, String)> {
        self.fragments(profile, |file| file.starts_with(TOOL_FRAGMENT))
    }

    /// The parts of the system prompt, in order: the `prompts/agent.system.*.md` fragments
    /// other than the tools' (merged by file name, first occurrence wins, sorted by file name),
    /// then the tools section ([`tools_prompt`](Self::tools_prompt)).
    ///
    /// Each part is masked with the current secrets (a fragment, or an MCP server's text, may
    /// hold a value).
    pub fn system_prompt_parts(&self, profile: &str) -> Vec<String> {
        let mut parts: Vec<String> = self
            .fragments(profile, |file| {
                file.starts_with("agent.system.") && !file.starts_with(TOOL_FRAGMENT)
            })
            .into_iter()
            .map(|(_, text)| text.trim().to_owned())
            .collect();
        parts.push(self.tools_prompt(profile).trim().to_owned());
        let store = self.secret_store();
        parts
            .into_iter()
            .map(|part| store.text(part).into_inner())
            .collect()
    }

    /// The `prompts/*.md` files that `pick` accepts, merged by file name across the layers.
    fn fragments(&self, profile: &str, pick: impl Fn(&str) -> bool) -> Vec<(String, String)> {
        prompt_files(&self.layers(profile), pick)
            .into_iter()
            .filter_map(|(file, path)| {
                let cap = self.options().max_text_bytes;
                match read_text(&path, cap, "HostOptions::max_text_bytes") {
                    Ok(text) => Some((file, text)),
                    Err(e) => {
                        tracing::warn!("skipping prompt {}: {e}", Escaped(&path));
                        None
                    }
                }
            })
            .collect()
    }

    /// The tools section of the system prompt: every fragment, plus a generated one (from the
    /// tool's description and parameters) for each tool that has no fragment of its own, the
    /// tools of the profile's MCP servers that are ready included (their description and
    /// `inputSchema`). A tool that cannot be called now (denied by the profile's config, not
    /// ready, breaker open) is left out, fragment and all.
    pub fn tools_prompt(&self, profile: &str) -> String {
        let listing = self.catalog(profile);
        let config = self.config(profile).ok();
        let denied = |t: &super::ListedTool| {
            let capabilities = &t.info().capabilities;
            config
                .as_ref()
                .is_some_and(|c| matches!(c.access(&t.name, capabilities), Access::Denied { .. }))
        };
        let unavailable: HashSet<String> = listing
            .tools
            .iter()
            .filter(|t| t.unavailable().is_some() || denied(t))
            .map(|t| format!("{TOOL_FRAGMENT}{}.md", t.name))
            .collect();
        let mut fragments = self.prompt_fragments(profile);
        fragments.retain(|(file, _)| !unavailable.contains(file));
        let covered: HashSet<String> = fragments
            .iter()
            .filter_map(|(file, _)| {
                file.strip_prefix(TOOL_FRAGMENT)?
                    .strip_suffix(".md")
                    .map(str::to_owned)
            })
            .collect();
        let mut parts: BTreeMap<String, String> = fragments
            .into_iter()
            .map(|(f, t)| (f, t.trim().to_owned()))
            .collect();
        for tool in listing.tools {
            let file = format!("{TOOL_FRAGMENT}{}.md", tool.name);
            if !covered.contains(&tool.name) && !unavailable.contains(&file) {
                parts.insert(
                    format!("{TOOL_FRAGMENT}{}.md", tool.name),
                    generated_fragment(&tool.name, tool.info()),
                );
            }
        }
        #[cfg(feature = "mcp")]
        for listed in listing.mcp {
            let (name, info) = (listed.tool.name(), listed.tool.info());
            let denied = config.as_ref().is_some_and(|c| {
                matches!(c.access(name, &info.capabilities), Access::Denied { .. })
            });
            if !covered.contains(name) && !denied && listed.tool.unavailable().is_none() {
                let file = format!("{TOOL_FRAGMENT}{name}.md");
                parts.insert(file, generated_fragment(name, info));
            }
        }
        let mut prompt = String::from("## Tools available:\n");
        for text in parts.values() {
            prompt.push('\n');
            prompt.push_str(text);
            prompt.push('\n');
        }
        prompt
    }
}

impl Host {
    /// Every tool the profile sees as a function definition (for models that call tools
    /// natively): its name, description and the JSON Schema of its arguments (an empty object
    /// schema when it declares none). An MCP tool is named `<server>__<tool>` there, since
    /// function names may not hold a `.`; a call by that name finds it.
    pub fn tool_specs(&self, profile: &str) -> Vec<ToolSpec> {
        let listing = self.catalog(profile);
        let mut specs = Vec::with_capacity(listing.tools.len());
        #[cfg(feature = "mcp")]
        specs.extend(
            listing
                .mcp
                .iter()
                .map(|m| spec(m.tool.native_name(), m.tool.info())),
        );
        specs.extend(listing.tools.iter().map(|t| spec(t.name.clone(), t.info())));
        specs
    }
}

/// A tool as a function definition.
fn spec(name: String, info: &ToolInfo) -> ToolSpec {
    let parameters = match info.parameters.get("type") {
        Some(kind) if kind == "object" => info.parameters.clone(),
        _ => serde_json::json!({"type": "object", "properties": {}}),
    };
    ToolSpec {
        description: info.description.trim().to_owned(),
        name,
        parameters,
    }
}

fn generated_fragment(name: &str, info: &ToolInfo) -> String {
    let mut text = format!("### {name}\n{}", info.description.trim());
    if info.parameters.get("properties").is_some() {
        text.push_str("\nArguments (JSON Schema): ");
        text.push_str(&info.parameters.to_string());
    }
    text
}
