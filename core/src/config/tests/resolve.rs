//! The governance answers: access lists and the approval policy.

use super::*;

#[test]
fn access_by_name_and_by_capability() {
    let text =
        "[access]\nallow = [\"weather\", \"cap:network\"]\ndeny = [\"shell\", \"cap:exec\"]\n";
    let config = load(&root(&[(GLOBAL, text)])).unwrap();
    assert_eq!(config.access("weather", &[]), Access::Allowed);
    assert_eq!(config.access("fetch", &caps(&["network"])), Access::Allowed);
    let denied = |tool, tags: &[&str]| match config.access(tool, &caps(tags)) {
        Access::Denied { reason } => reason,
        Access::Allowed => panic!("{tool} allowed"),
    };
    assert_eq!(
        denied("greet", &["text"]),
        "tool `greet` is not in usr/toolhost.toml:2 [access] allow"
    );
    assert_eq!(
        denied("shell", &[]),
        "tool `shell` is denied by \"shell\" in usr/toolhost.toml:3 [access] deny"
    );
    // Deny wins over allow: by capability, even for a tool allowed by name.
    assert_eq!(
        denied("weather", &["network", "exec"]),
        "tool `weather` is denied by \"cap:exec\" in usr/toolhost.toml:3 [access] deny"
    );
    let none = load(&root(&[(GLOBAL, "[access]\nallow = []\n")])).unwrap();
    assert!(matches!(none.access("weather", &[]), Access::Denied { .. }));
}

#[test]
fn policy_resolution_order() {
    let dir = root(&[]);
    let config = load(&dir).unwrap();
    let policy = |config: &Config, tool, risk| {
        let (decision, source) = config.policy(tool, risk);
        (decision, source.to_string())
    };
    use PolicyDecision::{Allow, Ask, Deny};
    assert_eq!(
        policy(&config, "a", RiskLevel::Read),
        (Allow, "default: read allows".into())
    );
    assert_eq!(
        policy(&config, "a", RiskLevel::Write),
        (Allow, "default: write allows".into())
    );
    assert_eq!(
        policy(&config, "a", RiskLevel::Exec),
        (Ask, "default: exec asks".into())
    );
    let global =
        "[policy]\nwrite = \"ask\"\nexec = \"deny\"\n\n[tools.weather]\npolicy = \"deny\"\n";
    let dev = "[tools.shell]\npolicy = \"allow\"\n";
    let config = load(&root(&[(GLOBAL, global), (DEV, dev)])).unwrap();
    assert_eq!(
        policy(&config, "a", RiskLevel::Read),
        (Allow, "default: read allows".into())
    );
    let write = (Ask, "usr/toolhost.toml:2 [policy] write".into());
    assert_eq!(policy(&config, "a", RiskLevel::Write), write);
    let exec = (Deny, "usr/toolhost.toml:3 [policy] exec".into());
    assert_eq!(policy(&config, "a", RiskLevel::Exec), exec);
    // A tool's own entry wins over its risk level, in either direction.
    let weather = (Deny, "usr/toolhost.toml:6 [tools.weather] policy".into());
    assert_eq!(policy(&config, "weather", RiskLevel::Read), weather);
    let shell = (
        Allow,
        "usr/agents/dev/toolhost.toml:2 [tools.shell] policy".into(),
    );
    assert_eq!(policy(&config, "shell", RiskLevel::Exec), shell);
}
