//! Example exchanges in the system prompt (`example_turns`): a line `User: MESSAGE` followed
//! at once by a fenced block (```` ``` ```` or `~~~`, any info string) that holds the reply.
//! With `example_turns`, each becomes a user message and an assistant message, and leaves the
//! prompt's text, with an `Example:` or `Examples:` line right before it.

/// The system prompt without its example exchanges, and the exchanges, in order, as
/// `(user message, reply)`. A `User:` line without a closed block right after it stays text.
pub(crate) fn split(system: &str) -> (String, Vec<(String, String)>) {
    let lines: Vec<&str> = system.lines().collect();
    let mut kept: Vec<&str> = Vec::with_capacity(lines.len());
    let mut exchanges = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        match exchange(&lines[i..]) {
            Some((user, reply, used)) => {
                let heading = kept.last().map(|l| l.trim());
                if matches!(heading, Some("Example:" | "Examples:")) {
                    kept.pop();
                }
                exchanges.push((user, reply));
                i += used;
            }
            None => {
                kept.push(lines[i]);
                i += 1;
            }
        }
    }
    let mut text = kept.join("\n");
    if system.ends_with('\n') {
        text.push('\n');
    }
    (text, exchanges)
}

/// The exchange at the start of `lines`: its message, its reply and the lines it takes.
fn exchange(lines: &[&str]) -> Option<(String, String, usize)> {
    let user = lines.first()?.trim().strip_prefix("User:")?.trim();
    let open = lines.get(1)?.trim();
    let fence = ["```", "~~~"].into_iter().find(|f| open.starts_with(f))?;
    let close = lines[2..].iter().position(|l| l.trim() == fence)?;
    let reply = lines[2..2 + close].join("\n").trim().to_owned();
    if user.is_empty() || reply.is_empty() {
        return None;
    }
    Some((user.to_owned(), reply, close + 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchanges_leave_the_text_with_their_heading_and_keep_their_order() {
        let system = "### greet\nGreets someone.\nExample:\nUser: Greet Ada.\n~~~json\n\
            {\"tool_name\": \"greet\", \"tool_args\": {\"name\": \"Ada\"}}\n~~~\n\n### other\n\
            User: Do it.\n```\n{\"tool_name\": \"other\"}\n```\nUser: no block here\nend\n";
        let (text, exchanges) = split(system);
        assert_eq!(
            text,
            "### greet\nGreets someone.\n\n### other\nUser: no block here\nend\n"
        );
        assert_eq!(
            exchanges,
            [
                (
                    "Greet Ada.".to_owned(),
                    "{\"tool_name\": \"greet\", \"tool_args\": {\"name\": \"Ada\"}}".to_owned()
                ),
                ("Do it.".to_owned(), "{\"tool_name\": \"other\"}".to_owned()),
            ]
        );
    }

    #[test]
    fn an_unclosed_or_empty_block_stays_text() {
        for system in [
            "User: Hi.\n~~~json\n{}\n",
            "User: Hi.\n~~~\n~~~\n",
            "User:\n~~~\n{}\n~~~",
        ] {
            assert_eq!(split(system), (system.to_owned(), Vec::new()), "{system}");
        }
    }
}
