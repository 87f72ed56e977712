//! Unit tests of masking and unmasking.
use super::*;

#[test]
fn longest_value_wins_and_short_values_are_left_alone() {
    let s = Secrets::parse("A=abcd\nB=abcdef\nC=ab\n# note\n\nD='quoted value'").unwrap();
    assert_eq!(
        s.mask("abcdef abcd ab quoted value"),
        "§§secret(B) §§secret(A) ab §§secret(D)"
    );
    assert!(matches!(s.replace("nothing here"), Cow::Borrowed(_)));
}

#[test]
fn unknown_placeholders_name_keys_never_values() {
    let s = Secrets::parse("API=sk-secret-1").unwrap();
    let e = s.unmask("use §§secret(NOPE)").unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Repairable);
    assert!(e.message().contains("§§secret(NOPE)"));
    assert!(e.message().contains("API"));
    assert!(!e.message().contains("sk-secret-1"));
}

#[test]
fn nested_arguments_are_unmasked_and_a_failure_changes_nothing() {
    let s = Secrets::parse("K=value-1").unwrap();
    let mut v = serde_json::json!({"a": ["x §§secret(K)", {"b": "§§secret(K)"}], "n": 1});
    assert!(s.unmask_value(&mut v).unwrap());
    assert_eq!(
        v,
        serde_json::json!({"a": ["x value-1", {"b": "value-1"}], "n": 1})
    );
    let mut bad = serde_json::json!({"a": "§§secret(K)", "b": "§§secret(X)"});
    let before = bad.clone();
    assert!(s.unmask_value(&mut bad).is_err());
    assert_eq!(bad, before);
}

#[test]
fn a_stream_never_shows_a_value_split_across_chunks() {
    let s = Secrets::parse("T=0123456789").unwrap();
    let text = "xx 0123456789 yy 01234 0123456789";
    for size in 1..text.len() {
        let mut stream = s.stream();
        let mut shown = String::new();
        let bytes: Vec<char> = text.chars().collect();
        for chunk in bytes.chunks(size) {
            shown += &stream.push(&chunk.iter().collect::<String>());
            assert!(!shown.contains("0123456789"), "chunk size {size}: {shown}");
        }
        shown += &stream.finish();
        assert_eq!(s.mask(text), shown, "chunk size {size}");
    }
}

#[test]
fn a_value_in_json_escaped_form_is_masked_too() {
    let s = Secrets::parse(r#"P='pa"ss\word'"#).unwrap();
    let json = serde_json::json!({"p": s.get("P").unwrap()}).to_string();
    assert_eq!(s.mask(&json), r#"{"p":"§§secret(P)"}"#);
    assert_eq!(s.mask(r#"x pa"ss\word y"#), "x §§secret(P) y");
}

#[test]
fn bad_lines_are_reported_by_number() {
    assert_eq!(
        Secrets::parse("A=1\nnot a pair\n").unwrap_err(),
        SecretsError { line: 2 }
    );
}

#[test]
fn typed_data_keeps_its_field_names() {
    let s = Secrets::parse("K=content").unwrap();
    let mut v = serde_json::json!({"content": "the content", "n": ["content"]});
    s.strings_in_place(&mut v);
    assert_eq!(
        v,
        serde_json::json!({"content": "the §§secret(K)", "n": ["§§secret(K)"]})
    );
}
