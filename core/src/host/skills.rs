//! Skills for the host's own agents: each `<layer>/skills/<name>/SKILL.md` of the profile's
//! layers (the first layer's winning, as for tools), the same skills `toolhost serve-mcp`
//! offers MCP clients. The system prompt lists each one's name and description from its
//! frontmatter, followed by its `SKILL.md` (at most [`SKILL_PROMPT_BYTES`] of it).

use super::Host;
use crate::layout::{is_safe_name, read_text, Escaped};

/// How much of one `SKILL.md` the system prompt carries (the rest is cut, saying so).
pub const SKILL_PROMPT_BYTES: usize = 8 << 10;

/// One skill of a profile's layers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillText {
    /// Its name: its folder's, which its frontmatter's `name:` repeats.
    pub name: String,
    /// Its frontmatter's `description:`.
    pub description: String,
    /// Its `SKILL.md` after the frontmatter.
    pub body: String,
}

/// What is wrong with a `SKILL.md`'s frontmatter: the file must open with a line `---`,
/// then `name: …` and `description: …` lines, then a closing `---` line; add what is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrontmatterError {
    /// The file does not open with `---`.
    #[error("SKILL.md does not open with a frontmatter (`---`)")]
    NoOpening,
    /// No `name:` line before the closing `---`.
    #[error("its frontmatter has no `name:`")]
    NoName,
    /// No `description:` line before the closing `---`.
    #[error("its frontmatter has no `description:`")]
    NoDescription,
    /// No closing `---` line.
    #[error("its frontmatter does not end (`---`)")]
    NoEnd,
}

/// The `name:` and `description:` of a `SKILL.md`'s frontmatter (the lines between its
/// opening and closing `---`; quotes around a value are taken off), and the text after it.
pub fn skill_frontmatter(text: &str) -> Result<(String, String, &str), FrontmatterError> {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err(FrontmatterError::NoOpening);
    };
    let (mut name, mut description) = (None, None);
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        if line.trim_end() == "---" {
            let name = name.ok_or(FrontmatterError::NoName)?;
            let description = description.ok_or(FrontmatterError::NoDescription)?;
            return Ok((name, description, &rest[at..]));
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        match key.trim() {
            "name" => name = Some(value.to_owned()),
            "description" => description = Some(value.to_owned()),
            _ => {}
        }
    }
    Err(FrontmatterError::NoEnd)
}

impl Host {
    /// The skills of the profile's layers, sorted by name: a folder whose `SKILL.md` cannot
    /// be read, has no frontmatter, or names another skill is left out (logged at debug;
    /// `serve-mcp` warns about it).
    pub fn skills(&self, profile: &str) -> Vec<SkillText> {
        let mut found = std::collections::BTreeMap::new();
        for layer in self.layers(profile).iter() {
            let Ok(entries) = std::fs::read_dir(layer.skills_dir()) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !is_safe_name(&name) || found.contains_key(&name) {
                    continue;
                }
                let path = entry.path().join("SKILL.md");
                if !path.is_file() {
                    continue;
                }
                let cap = self.options().max_text_bytes;
                let read = read_text(&path, cap, "HostOptions::max_text_bytes");
                let skill = read.map_err(|e| e.to_string()).and_then(|text| {
                    let (declared, description, body) =
                        skill_frontmatter(&text).map_err(|e| e.to_string())?;
                    if declared != name {
                        return Err(format!("its frontmatter names '{declared}'"));
                    }
                    let body = body.trim().to_owned();
                    Ok(SkillText {
                        name: name.clone(),
                        description,
                        body,
                    })
                });
                match skill {
                    Ok(skill) => {
                        found.insert(name, skill);
                    }
                    Err(e) => tracing::debug!("skill {}: left out: {e}", Escaped(&path)),
                }
            }
        }
        found.into_values().collect()
    }

    /// The skills section of the system prompt: each skill's name and description, then its
    /// `SKILL.md` (cut at [`SKILL_PROMPT_BYTES`]); empty when the profile has none.
    pub fn skills_prompt(&self, profile: &str) -> String {
        let skills = self.skills(profile);
        if skills.is_empty() {
            return String::new();
        }
        let mut prompt = String::from(
            "## Skills available:\nFollow a skill's instructions when a task is of its kind.\n",
        );
        for skill in skills {
            prompt.push_str(&format!("\n### {}: {}\n", skill.name, skill.description));
            let mut end = skill.body.len().min(SKILL_PROMPT_BYTES);
            while !skill.body.is_char_boundary(end) {
                end -= 1;
            }
            prompt.push_str(&skill.body[..end]);
            if end < skill.body.len() {
                let left = skill.body.len() - end;
                prompt.push_str(&format!("\n[… {left} more bytes of this skill cut]"));
            }
            prompt.push('\n');
        }
        prompt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frontmatter_gives_the_name_and_the_description_or_says_what_is_missing() {
        let text = "---\nname: trip\ndescription: \"Plans a trip\"\nlicense: MIT\n---\n# Trip\n";
        assert_eq!(
            skill_frontmatter(text).unwrap(),
            ("trip".to_owned(), "Plans a trip".to_owned(), "# Trip\n")
        );
        let missing = |text| skill_frontmatter(text).unwrap_err();
        assert_eq!(missing("# no frontmatter"), FrontmatterError::NoOpening);
        assert_eq!(missing("---\nname: x\n"), FrontmatterError::NoEnd);
        assert_eq!(
            missing("---\ndescription: d\n---\n"),
            FrontmatterError::NoName
        );
        assert_eq!(
            missing("---\nname: x\n---\n"),
            FrontmatterError::NoDescription
        );
    }
}
