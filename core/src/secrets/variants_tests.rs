//! Unit tests of the forms generated for a value.
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;

use super::*;

fn has(forms: &[String], form: &str) -> bool {
    forms.iter().any(|f| f == form)
}

#[test]
fn case_json_and_hex_forms() {
    let forms = variants("Pä/ss\"w");
    assert_eq!(forms[0], "Pä/ss\"w");
    for form in [
        "PÄ/SS\"W",
        "pä/ss\"w",
        r#"Pä/ss\"w"#,
        r#"P\u00e4/ss\"w"#,
        r#"P\u00E4/ss\"w"#,
        r#"Pä\/ss\"w"#,
        r#"P\u00e4\/ss\"w"#,
        r#"\u0050\u00e4\u002f\u0073\u0073\u0022\u0077"#,
        r#"\u0050\u00E4\u002F\u0073\u0073\u0022\u0077"#,
        r#"Pä/ss\\\"w"#,
        r#"P\\u00e4/ss\\\"w"#,
        r#"\\u0050\\u00e4\\u002f\\u0073\\u0073\\u0022\\u0077"#,
        "50c3a42f73732277",
        "50C3A42F73732277",
    ] {
        assert!(has(&forms, form), "{form} missing from {forms:#?}");
    }
    let astral = variants("key🔑");
    assert!(has(&astral, r#"key\ud83d\udd11"#), "{astral:#?}");
}

#[test]
fn url_forms() {
    let forms = variants("a b/c&d'é");
    for form in [
        "a%20b%2Fc%26d%27%C3%A9",
        "a%20b%2fc%26d%27%c3%a9",
        "a+b%2Fc%26d%27%C3%A9",
        "a+b%2fc%26d%27%c3%a9",
        "a%20b/c%26d%27%C3%A9",
        "a%20b%2Fc%26d'%C3%A9",
        "a%20b/c&d'%C3%A9",
    ] {
        assert!(has(&forms, form), "{form} missing from {forms:#?}");
    }
}

#[test]
fn html_forms() {
    let forms = variants("<a&b>\"c'é");
    for form in [
        "&lt;a&amp;b&gt;&quot;c&#39;é",
        "&lt;a&amp;b&gt;&quot;c&#x27;é",
        "&lt;a&amp;b&gt;\"c'é",
        "&lt;a&amp;b&gt;&quot;c&#39;&#233;",
        "&#60;&#97;&#38;&#98;&#62;&#34;&#99;&#39;&#233;",
        "&#x3c;&#x61;&#x26;&#x62;&#x3e;&#x22;&#x63;&#x27;&#xe9;",
    ] {
        assert!(has(&forms, form), "{form} missing from {forms:#?}");
    }
}

#[test]
fn base64_whole_and_inside_longer_text_at_each_alignment() {
    let value = "sk-live-4f9a8b?>~";
    let forms = variants(value);
    assert!(has(&forms, &STANDARD.encode(value)), "{forms:#?}");
    assert!(has(&forms, &URL_SAFE_NO_PAD.encode(value)), "{forms:#?}");
    for engine in [STANDARD, base64::engine::general_purpose::URL_SAFE] {
        for before in ["", "x", "xy", "xyz", "wxyz"] {
            for after in ["", "!", "!!", "!!!"] {
                let text = engine.encode(format!("{before}{value}{after}"));
                assert!(
                    forms
                        .iter()
                        .any(|f| f.len() >= MIN_BASE64_RUN && text.contains(f.as_str())),
                    "no form of {value} in {text} ({before:?} before it)"
                );
            }
        }
    }
}

#[test]
fn a_short_value_keeps_only_its_whole_base64() {
    // 4 bytes: 5 characters at offset 0, 3 or 4 at the others: all below MIN_BASE64_RUN.
    let forms = variants("abcd");
    assert!(has(&forms, "YWJjZA=="));
    assert!(has(&forms, "YWJjZA"));
    assert!(!forms.iter().any(|f| f.len() < 4));
    assert!(!has(&forms, "YWJj"), "{forms:#?}");
}

#[test]
fn a_plain_token_has_about_twenty_forms() {
    let forms = variants("sk-live-4f9a8b7c6d5e");
    assert!((15..=25).contains(&forms.len()), "{forms:#?}");
    let unique: BTreeSet<&String> = forms.iter().collect();
    assert_eq!(unique.len(), forms.len());
}
