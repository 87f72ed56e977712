//! The forms of a secret value that masking looks for: the value, its case variants, and the
//! encodings a tool's output commonly carries it in.
//!
//! For a value `v` (of [`MIN_MASKED_LEN`](super::MIN_MASKED_LEN) characters or more):
//!
//! - **case**: `v` upper-cased and lower-cased;
//! - **JSON**: the escaped string (quotes and backslashes escaped), the same with `\/` for `/`
//!   (PHP), with `\uXXXX` for each non-ASCII character (Python's `ensure_ascii`; UTF-16 pairs
//!   above U+FFFF; lower- and upper-case hex), with `\uXXXX` for every character, and each of
//!   these escaped a second time (JSON inside a JSON string);
//! - **URL**: none is generated: URL-encoded text is matched decoded (see `decoded.rs`),
//!   whatever set of bytes was escaped, in either hex case; only the value with `+` for each
//!   space (a form's encoding) is a form;
//! - **base64**, standard and URL-safe, with and without padding, as a whole (wrapped in lines
//!   too: see `decoded.rs`); and, for base64
//!   text in which the value starts at byte 0, 1 or 2 of a 3-byte group, the characters that
//!   depend on the value's bytes only (see [`MIN_BASE64_RUN`]);
//! - **hex**, lower- and upper-case;
//! - **HTML**: `&amp; &lt; &gt; &quot;` with `&#39;` or `&#x27;` for `'`; only `& < >` escaped
//!   (text content); the named forms with `&#NNN;` for non-ASCII; and every character as a
//!   decimal `&#NN;` or a hex `&#xNN;` reference.
//!
//! Forms equal to another are kept once. Combinations (base64 of the upper-cased value, URL
//! encoding of the JSON escape) are not generated.

use std::collections::BTreeSet;

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;

/// The fewest base64 characters of a value's encoding *inside longer base64 text* that are
/// masked (48 bits). A shorter run is left alone: a value of 4 to 6 bytes has only 3 to 7
/// characters that do not depend on its neighbours, and a run that short matches ordinary
/// base64 text (one 5-character run is met every 2^30 characters of random base64, 8 characters
/// every 2^48, so about once in 280 TB of random base64 with 1,000 secrets of 6 such runs each).
/// A value's complete encodings (alone, with or without padding) are always masked.
pub(super) const MIN_BASE64_RUN: usize = 8;

/// Every form of `value` to mask, the value itself first; each once, and none shorter than
/// `MIN_MASKED_LEN` bytes.
pub(super) fn variants(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_owned(), value.to_uppercase(), value.to_lowercase()];
    forms.extend(json_forms(value));
    forms.extend(url_forms(value));
    forms.extend(base64_forms(value.as_bytes()));
    forms.push(hex::encode(value));
    forms.push(hex::encode_upper(value));
    forms.extend(html_forms(value));
    let mut seen = BTreeSet::new();
    forms.retain(|f| f.len() >= super::MIN_MASKED_LEN && seen.insert(f.clone()));
    forms
}

/// The JSON escape of `text` without the quotes; `unicode` also escapes non-ASCII.
fn json_escape(text: &str, unicode: bool, upper: bool) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    let plain = &quoted[1..quoted.len().saturating_sub(1).max(1)];
    if !unicode {
        return plain.to_owned();
    }
    let mut out = String::with_capacity(plain.len() * 2);
    for c in plain.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            push_utf16_escapes(&mut out, c, upper);
        }
    }
    out
}

fn push_utf16_escapes(out: &mut String, c: char, upper: bool) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units) {
        if upper {
            out.push_str(&format!("\\u{unit:04X}"));
        } else {
            out.push_str(&format!("\\u{unit:04x}"));
        }
    }
}

fn json_forms(value: &str) -> Vec<String> {
    let mut single = vec![
        json_escape(value, false, false),
        json_escape(value, true, false),
        json_escape(value, true, true),
    ];
    // `\/` (PHP escapes the slash, with `\u` for non-ASCII).
    let slashed: Vec<String> = single.iter().map(|s| s.replace('/', "\\/")).collect();
    single.extend(slashed);
    for upper in [false, true] {
        let mut every = String::new();
        value
            .chars()
            .for_each(|c| push_utf16_escapes(&mut every, c, upper));
        single.push(every);
    }
    let double: Vec<String> = single
        .iter()
        .map(|s| json_escape(s, false, false))
        .collect();
    single.extend(double);
    single
}

/// The URL forms: only the value with `+` for each space, as a form's encoding gives it
/// decoded (its escapes are decoded where it is looked for).
fn url_forms(value: &str) -> Vec<String> {
    match value.contains(' ') {
        true => vec![value.replace(' ', "+")],
        false => Vec::new(),
    }
}

fn base64_forms(bytes: &[u8]) -> Vec<String> {
    let mut forms = Vec::new();
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        let whole = engine.encode(bytes);
        let padding = "=".repeat((4 - whole.len() % 4) % 4);
        forms.push(format!("{whole}{padding}"));
        forms.push(whole);
        for offset in 0..3 {
            // After `offset` bytes of something else, characters `ceil(8 * offset / 6)` up to
            // `floor(8 * (offset + n) / 6)` hold the value's bits only.
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(bytes);
            let text = engine.encode(&shifted);
            let (from, to) = ((8 * offset).div_ceil(6), 8 * (offset + bytes.len()) / 6);
            if to >= from + MIN_BASE64_RUN {
                forms.push(text[from..to].to_owned());
            }
        }
    }
    forms
}

/// The HTML escape of `text`: `&`, `<` and `>` always; with `quote`, `"` and `'` (as `apos`)
/// too; with `numeric`, non-ASCII characters as decimal references.
fn html_escape(text: &str, quote: Option<&str>, numeric: bool) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match (c, quote) {
            ('&', _) => out.push_str("&amp;"),
            ('<', _) => out.push_str("&lt;"),
            ('>', _) => out.push_str("&gt;"),
            ('"', Some(_)) => out.push_str("&quot;"),
            ('\'', Some(apos)) => out.push_str(apos),
            (c, _) if numeric && !c.is_ascii() => out.push_str(&format!("&#{};", c as u32)),
            (c, _) => out.push(c),
        }
    }
    out
}

fn html_forms(value: &str) -> Vec<String> {
    let mut forms = vec![
        html_escape(value, Some("&#39;"), false),
        html_escape(value, Some("&#x27;"), false),
        html_escape(value, None, false),
        html_escape(value, Some("&#39;"), true),
    ];
    forms.push(value.chars().map(|c| format!("&#{};", c as u32)).collect());
    forms.push(
        value
            .chars()
            .map(|c| format!("&#x{:x};", c as u32))
            .collect(),
    );
    forms
}

#[cfg(test)]
mod tests {
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
        // URL-encoded text is matched decoded: only `+` for a space is a form of its own.
        let forms = variants("a b/c&d'é");
        assert!(has(&forms, "a+b/c&d'é"), "{forms:#?}");
        assert!(!forms.iter().any(|f| f.contains('%')), "{forms:#?}");
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
}
