//! Saving an "always" approval into a file.

use super::*;

#[test]
fn save_tool_policy_keeps_comments_and_loads() {
    let text = "# Governance for every profile.\n[policy]\nexec = \"ask\" # ask a person\n\n\
                # Weather is slow.\n[tools.weather]\ntimeout_seconds = 10 # seconds\n";
    let dir = root(&[(GLOBAL, text)]);
    let path = dir.path().join(GLOBAL);
    save_tool_policy(&path, "weather", PolicyDecision::Allow).unwrap();
    save_tool_policy(&path, "shell", PolicyDecision::Allow).unwrap();
    let saved = fs::read_to_string(&path).unwrap();
    assert_eq!(
        saved,
        format!("{text}policy = \"allow\"\n\n[tools.shell]\npolicy = \"allow\"\n")
    );
    let config = load(&dir).unwrap();
    assert_eq!(
        config.policy("shell", RiskLevel::Exec).0,
        PolicyDecision::Allow
    );
    assert_eq!(config.timeout("weather", SECOND), 10 * SECOND);
    // Saving again replaces the value and keeps its comment.
    fs::write(&path, "[tools.shell]\npolicy = \"ask\" # was asked\n").unwrap();
    save_tool_policy(&path, "shell", PolicyDecision::Deny).unwrap();
    let saved = fs::read_to_string(&path).unwrap();
    assert_eq!(saved, "[tools.shell]\npolicy = \"deny\" # was asked\n");
    let leftovers = fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");
}

#[test]
fn save_tool_policy_creates_the_file_and_follows_inline_tables() {
    let dir = root(&[]);
    let path = dir.path().join(DEV);
    save_tool_policy(&path, "my.tool", PolicyDecision::Allow).unwrap();
    let saved = fs::read_to_string(&path).unwrap();
    assert_eq!(saved, "[tools.\"my.tool\"]\npolicy = \"allow\"\n");
    let config = load(&dir).unwrap();
    assert_eq!(
        config.policy("my.tool", RiskLevel::Exec).0,
        PolicyDecision::Allow
    );
    fs::write(&path, "tools = { greet = { max_retries = 1 } }\n").unwrap();
    save_tool_policy(&path, "greet", PolicyDecision::Allow).unwrap();
    save_tool_policy(&path, "shell", PolicyDecision::Ask).unwrap();
    let config = load(&dir).unwrap();
    assert_eq!(
        config.policy("greet", RiskLevel::Exec).0,
        PolicyDecision::Allow
    );
    assert_eq!(
        config.policy("shell", RiskLevel::Read).0,
        PolicyDecision::Ask
    );
    assert_eq!(config.max_retries("greet", 0), 1);
}

#[test]
fn save_tool_policy_leaves_a_file_with_a_mistake_alone() {
    let text = "[calls]\ntimeout = 3\n";
    let dir = root(&[(GLOBAL, text)]);
    let path = dir.path().join(GLOBAL);
    let err = save_tool_policy(&path, "weather", PolicyDecision::Allow).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::UnknownKey);
    assert_eq!(err.line, Some(2));
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    let err = save_tool_policy(&path, "../x", PolicyDecision::Allow).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidValue);
    fs::write(&path, "tools = 3\n").unwrap();
    let err = save_tool_policy(&path, "weather", PolicyDecision::Allow).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidValue, "{err}");
}
