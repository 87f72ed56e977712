//! What a log item shows of a call's arguments or of a model's reply: a copy bounded to
//! [`SHOWN_BYTES`], so that megabytes of arguments or of reply do not keep a second copy in
//! the session's log. The call itself, its validation and its audit record have the
//! arguments whole; the history has the reply whole.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::long_output::floor_char_boundary;
use crate::secrets::Secrets;

/// About the most bytes of arguments a log item keeps (strings cut, then values left out):
/// the bound of a tool's answer in the history,
/// [`DEFAULT_MAX_OUTPUT`](super::long_output::DEFAULT_MAX_OUTPUT).
pub(crate) const SHOWN_BYTES: usize = super::long_output::DEFAULT_MAX_OUTPUT;

/// What a value no longer shown is replaced with.
const LEFT_OUT: &str = "(left out: the arguments are longer than a log item shows)";

/// `text` cut to [`SHOWN_BYTES`], saying so and where it is whole.
pub(crate) fn text(text: &str, whole_in: &str, secrets: &Secrets) -> String {
    if text.len() <= SHOWN_BYTES {
        return text.to_owned();
    }
    let end = floor_char_boundary(text, SHOWN_BYTES);
    format!(
        "{}… (cut: {} bytes in all; {whole_in} has it whole)",
        cut_masked(&text[..end], secrets),
        text.len()
    )
}

/// The start of a cut text, masked here: masked after the cut (as the log masks), a secret
/// value the cut goes through would show its first part. The stream holds back an end that
/// could be the start of one.
fn cut_masked(start: &str, secrets: &Secrets) -> String {
    secrets.stream().push(start).into_inner()
}

/// `args`, every string cut and every value past the bound left out (see the module).
/// Arguments within the bound (nearly all) are cloned as they are, and `secrets` is asked for
/// only to cut: a call's log item costs what a clone costs.
pub(crate) fn args(
    args: &Map<String, Value>,
    secrets: impl FnOnce() -> Arc<Secrets>,
) -> Map<String, Value> {
    let mut budget = SHOWN_BYTES;
    if args.values().all(|value| fits(value, &mut budget)) {
        return args.clone();
    }
    let secrets = secrets();
    let mut budget = SHOWN_BYTES;
    args.iter()
        .map(|(name, value)| (name.clone(), bounded(value, &mut budget, &secrets)))
        .collect()
}

/// Whether [`bounded`] would show `value` whole, counting as it does.
fn fits(value: &Value, budget: &mut usize) -> bool {
    if *budget == 0 {
        return false;
    }
    match value {
        Value::String(text) if text.len() > *budget => false,
        Value::String(text) => {
            *budget -= text.len();
            true
        }
        Value::Array(items) => {
            *budget = budget.saturating_sub(8);
            items.iter().all(|item| fits(item, budget))
        }
        Value::Object(members) => {
            *budget = budget.saturating_sub(8);
            members.iter().all(|(name, member)| {
                *budget != 0 && {
                    *budget = budget.saturating_sub(name.len());
                    fits(member, budget)
                }
            })
        }
        _ => {
            *budget = budget.saturating_sub(8);
            true
        }
    }
}

/// `value` within `budget` bytes (counted roughly: a string its length, anything else 8).
fn bounded(value: &Value, budget: &mut usize, secrets: &Secrets) -> Value {
    if *budget == 0 {
        return Value::String(LEFT_OUT.to_owned());
    }
    match value {
        Value::String(text) if text.len() > *budget => {
            let end = floor_char_boundary(text, *budget);
            *budget = 0;
            Value::String(format!(
                "{}… (cut: {} bytes in all)",
                cut_masked(&text[..end], secrets),
                text.len()
            ))
        }
        Value::String(text) => {
            *budget -= text.len();
            value.clone()
        }
        Value::Array(items) => {
            *budget = budget.saturating_sub(8);
            let mut shown = Vec::new();
            for item in items {
                if *budget == 0 {
                    shown.push(Value::String(LEFT_OUT.to_owned()));
                    break;
                }
                shown.push(bounded(item, budget, secrets));
            }
            Value::Array(shown)
        }
        Value::Object(members) => {
            *budget = budget.saturating_sub(8);
            let mut shown = Map::new();
            for (name, member) in members {
                if *budget == 0 {
                    shown.insert(name.clone(), Value::String(LEFT_OUT.to_owned()));
                    break;
                }
                *budget = budget.saturating_sub(name.len());
                shown.insert(name.clone(), bounded(member, budget, secrets));
            }
            Value::Object(shown)
        }
        scalar => {
            *budget = budget.saturating_sub(8);
            scalar.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_arguments_are_shown_whole_and_large_ones_cut() {
        let small = json!({"name": "Ada", "n": [1, 2, {"deep": true}]});
        let small = small.as_object().unwrap();
        let none = Arc::new(Secrets::empty());
        let unasked = || -> Arc<Secrets> { panic!("the secrets are read only to cut") };
        assert_eq!(&args(small, unasked), small);
        // Exactly at the bound: whole, as the cut would count it.
        let full = json!({"a": "x".repeat(SHOWN_BYTES - 8 - 1), "b": [true]});
        assert_eq!(
            &args(full.as_object().unwrap(), unasked),
            full.as_object().unwrap()
        );
        let big = json!({"a": "é".repeat(SHOWN_BYTES), "b": "later", "c": vec![1; 100_000]});
        let cut = Value::Object(args(big.as_object().unwrap(), || none.clone()));
        let json = cut.to_string();
        assert!(json.len() < SHOWN_BYTES + 1024, "{}", json.len());
        assert!(
            json.contains("(cut: 131072 bytes in all)"),
            "the cut is said"
        );
        assert_eq!(cut["b"], json!(LEFT_OUT));
        assert_eq!(text("short", "x", &none), "short");
        let long = text(&"ab".repeat(SHOWN_BYTES), "the history", &none);
        assert!(long.ends_with("… (cut: 131072 bytes in all; the history has it whole)"));
    }

    #[test]
    fn a_secret_the_cut_goes_through_shows_none_of_itself() {
        let secrets = Secrets::parse("KEY=hunter2-abcdef").unwrap();
        let long = format!(
            "{}hunter2-abcdef{}",
            "x".repeat(SHOWN_BYTES - 7),
            "y".repeat(99)
        );
        let shown = text(&long, "the history", &secrets);
        assert!(!shown.contains("hunter2"), "{}", &shown[shown.len() - 80..]);
        let args = json!({"a": long}).as_object().unwrap().clone();
        let secrets = Arc::new(secrets);
        let shown = Value::Object(super::args(&args, || secrets.clone())).to_string();
        assert!(!shown.contains("hunter2"), "the arguments' cut too");
    }
}
