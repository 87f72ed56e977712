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
    assert_eq!(e.kind(), plugin_api::ErrorKind::Repairable);
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

/// `text` masked, and every value of `s` absent from the result.
fn masked_clean(s: &Secrets, text: &str) -> String {
    let out = s.mask(text).into_inner();
    for (_, value) in &s.pairs {
        assert!(!out.contains(value.as_str()), "{value} in {out}");
    }
    out
}

#[test]
fn every_common_encoding_of_a_value_is_masked() {
    let s = Secrets::parse("K=Pä/ss w\"&<'x>").unwrap();
    for encoded in [
        "PÄ/SS W\"&<'X>",
        "pä/ss w\"&<'x>",
        r#"P\u00e4/ss w\"&<'x>"#,
        r#"P\u00E4\/ss w\"&<'x>"#,
        r#"\u0050\u00e4\u002f\u0073\u0073\u0020\u0077\u0022\u0026\u003c\u0027\u0078\u003e"#,
        r#"Pä/ss w\\\"&<'x>"#,
        r#"Pä\/ss w\"&<'x>"#,
        "P%C3%A4%2Fss%20w%22%26%3C%27x%3E",
        "P%c3%a4%2fss+w%22%26%3c%27x%3e",
        "UMOkL3NzIHciJjwneD4=",
        "UMOkL3NzIHciJjwneD4",
        "50c3a42f7373207722263c27783e",
        "50C3A42F7373207722263C27783E",
        "Pä/ss w&quot;&amp;&lt;&#39;x&gt;",
        "Pä/ss w&quot;&amp;&lt;&#x27;x&gt;",
        "P&#228;/ss w&quot;&amp;&lt;&#39;x&gt;",
    ] {
        let out = s.mask(&format!("[{encoded}]")).into_inner();
        assert_eq!(out, "[§§secret(K)]", "{encoded}");
    }
}

#[test]
fn url_encoded_text_is_masked_whatever_was_escaped_in_either_case() {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let value = "sk-live_4f9a.8b7c~6d/5e";
    let s = Secrets::parse(&format!("K={value}")).unwrap();
    // Rust's NON_ALPHANUMERIC (`%2D` for `-`), in upper and lower case; and every byte escaped.
    let every: String = value.bytes().map(|b| format!("%{b:02x}")).collect();
    let upper = utf8_percent_encode(value, NON_ALPHANUMERIC).to_string();
    let lower = upper
        .replace("%2D", "%2d")
        .replace("%2F", "%2f")
        .replace("%2E", "%2e");
    for encoded in [
        upper.as_str(),
        &lower,
        &every,
        "sk%2dlive_4f9a.8b7c~6d%2F5e",
    ] {
        let text = format!("GET /x?token={encoded}&y=1");
        assert_eq!(
            s.mask(&text).into_inner(),
            "GET /x?token=§§secret(K)&y=1",
            "{encoded}"
        );
    }
    // Escapes that decode to no value stay as they are.
    assert_eq!(s.mask("100%25 %zz %2").into_inner(), "100%25 %zz %2");
}

#[test]
fn a_stream_of_url_encoded_text_holds_back_a_value_still_arriving() {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let s = Secrets::parse("K=abcd-efgh/ijkl").unwrap();
    let encoded = utf8_percent_encode("abcd-efgh/ijkl", NON_ALPHANUMERIC).to_string();
    let text = format!("url: https://h/?k={encoded}&more, done");
    for size in 1..text.len() {
        let mut stream = s.stream();
        let mut shown = String::new();
        for chunk in text.as_bytes().chunks(size) {
            shown += &stream.push(std::str::from_utf8(chunk).unwrap());
            assert!(!shown.contains("efgh"), "chunk size {size}: {shown}");
        }
        shown += &stream.finish();
        assert_eq!(shown, "url: https://h/?k=§§secret(K)&more, done", "{size}");
    }
}

#[test]
fn base64_wrapped_in_lines_or_unpadded_is_masked() {
    use base64::Engine;
    let value = "sk-live-4f9a8b7c6d5e";
    let s = Secrets::parse(&format!("K={value}")).unwrap();
    let engine = base64::engine::general_purpose::STANDARD;
    // The value straddles the line breaks of MIME's 76-character lines, at each place.
    for before in 40..60 {
        let plain = format!("{}{value}{}", "x".repeat(before), "y".repeat(30));
        let encoded = engine.encode(&plain);
        for newline in ["\n", "\r\n"] {
            let wrapped: Vec<&str> = encoded
                .as_bytes()
                .chunks(76)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            let text = wrapped.join(newline);
            let out = s.mask(&text).into_inner();
            assert!(out.contains("§§secret(K)"), "{before}: {out}");
        }
    }
    let unpadded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(value);
    assert_eq!(
        s.mask(&format!("[{unpadded}]")).into_inner(),
        "[§§secret(K)]"
    );
}

#[test]
fn base64_of_a_value_inside_longer_text_is_masked_at_each_alignment() {
    use base64::Engine;
    let value = "sk-live-4f9a8b7c6d5e";
    let s = Secrets::parse(&format!("K={value}")).unwrap();
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    for engine in engines {
        for before in ["", "{", "{\"", "{\"k"] {
            let plain = format!("{before}{value}\"}}");
            let text = engine.encode(&plain);
            let out = s.mask(&text).into_inner();
            assert!(out.contains("§§secret(K)"), "{before:?}: {out}");
            // What is left shows at most the bits of the neighbouring bytes: 2 characters on
            // each side of the placeholder, plus the encoding of the text around.
            let left = out.replace("§§secret(K)", "");
            assert!(left.len() <= text.len() - 20, "{before:?}: {out}");
        }
    }
}

#[test]
fn overlapping_values_are_masked_entirely() {
    let s = Secrets::parse("A=abcd1234\nB=1234wxyz\nC=cd12").unwrap();
    assert_eq!(
        masked_clean(&s, "x abcd1234wxyz y"),
        "x §§secret(A)§§secret(B) y"
    );
    assert_eq!(
        masked_clean(&s, "1234wxyz abcd1234"),
        "§§secret(B) §§secret(A)"
    );
    // A value inside another is part of it; a chain of three overlaps is one stretch.
    let s = Secrets::parse("A=abcdef\nB=bcd1\nC=ef12\nD=1234").unwrap();
    assert_eq!(masked_clean(&s, "abcdef"), "§§secret(A)");
    assert_eq!(
        masked_clean(&s, "-abcdef1234-"),
        "-§§secret(A)§§secret(C)§§secret(D)-"
    );
    // Two matches of one value that overlap give one placeholder.
    let s = Secrets::parse("A=abcd-abcd").unwrap();
    assert_eq!(masked_clean(&s, "abcd-abcd-abcd!"), "§§secret(A)!");
}

#[test]
fn a_stream_masks_encodings_and_overlaps_like_the_whole_text() {
    let s = Secrets::parse("A=abcd1234\nB=1234wxyz\nP=pass word/1").unwrap();
    let text = "x abcd1234wxyz y pass%20word%2F1 cGFzcyB3b3JkLzE= PASS WORD/1 z";
    let whole = s.mask(text).into_inner();
    assert!(
        !whole.contains("wxyz") && !whole.contains("word"),
        "{whole}"
    );
    for size in 1..text.len() {
        let mut stream = s.stream();
        let mut shown = String::new();
        for chunk in text.as_bytes().chunks(size) {
            shown += &stream.push(std::str::from_utf8(chunk).unwrap());
        }
        shown += &stream.finish();
        assert_eq!(shown, whole, "chunk size {size}");
    }
}

#[test]
fn object_keys_are_unmasked_too() {
    let s = Secrets::parse("K=value-1").unwrap();
    let mut v = serde_json::json!({"§§secret(K)": {"x §§secret(K)": 1}, "plain": 2});
    assert!(s.unmask_value(&mut v).unwrap());
    assert_eq!(
        v,
        serde_json::json!({"value-1": {"x value-1": 1}, "plain": 2})
    );
}

#[test]
fn an_unmask_error_names_each_unknown_key_once() {
    let s = Secrets::parse("K=value-1").unwrap();
    let text = "§§secret(NOPE) ".repeat(100_000) + "§§secret(OTHER)";
    let e = s.unmask(&text).unwrap_err();
    assert_eq!(e.message().matches("§§secret(NOPE)").count(), 1);
    assert!(e.message().contains("§§secret(OTHER)"));
    assert!(e.message().len() < 300, "{}", e.message());
    // Across a whole value too, and many distinct keys are cut short.
    let many: Vec<String> = (0..1000).map(|i| format!("§§secret(X{i})")).collect();
    let mut v = serde_json::json!({"a": many, "b": "§§secret(NOPE)"});
    let e = s.unmask_value(&mut v).unwrap_err();
    assert!(e.message().len() < 500, "{}", e.message());
    assert!(e.message().contains("and others"), "{}", e.message());
}

#[test]
fn pieces_cover_exactly_the_matches_of_every_value_streamed_too() {
    // A small deterministic generator: values and texts over "ab", so they overlap a lot.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    for _ in 0..300 {
        let values: Vec<String> = (0..1 + next(4))
            .map(|_| {
                (0..4 + next(4))
                    .map(|_| ['a', 'b'][next(2) as usize])
                    .collect()
            })
            .collect();
        let text: String = (0..next(40))
            .map(|_| ['a', 'b'][next(2) as usize])
            .collect();
        let s = Secrets::from_pairs(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("K{i}"), v.clone())),
        );
        let mut hidden = vec![false; text.len()];
        for v in &values {
            for (at, _) in text.match_indices(v.as_str()) {
                hidden[at..at + v.len()].iter_mut().for_each(|h| *h = true);
            }
            // Overlapping occurrences too.
            for at in 0..text.len() {
                if text[at..].starts_with(v.as_str()) {
                    hidden[at..at + v.len()].iter_mut().for_each(|h| *h = true);
                }
            }
        }
        let mut covered = vec![false; text.len()];
        let mut last_end = 0;
        s.matcher.as_ref().unwrap().pieces(&text, |p| {
            assert!(p.start >= last_end && p.end > p.start, "{values:?} {text}");
            assert!(!p.joined || p.start == last_end, "{values:?} {text}");
            covered[p.start..p.end].iter_mut().for_each(|c| *c = true);
            last_end = p.end;
        });
        assert_eq!(covered, hidden, "{values:?} in {text}");
        // Streamed in chunks, the text is masked as a whole.
        let size = 1 + next(6) as usize;
        let mut stream = s.stream();
        let mut shown = String::new();
        for chunk in text.as_bytes().chunks(size) {
            shown += &stream.push(std::str::from_utf8(chunk).unwrap());
        }
        shown += &stream.finish();
        assert_eq!(shown, s.mask(&text).into_inner(), "{values:?} in {text}");
    }
}

#[test]
fn a_stream_holds_back_only_what_could_begin_a_value() {
    let s = Secrets::parse("K=sk-live-4f9a8b7c6d5e").unwrap();
    let mut stream = s.stream();
    // The longest form is 120 bytes; none of these ends like the start of a form.
    assert_eq!(
        stream.push("nothing to hide here. "),
        "nothing to hide here. "
    );
    assert_eq!(stream.push("the key: sk-li"), "the key: ");
    assert_eq!(stream.push("ve-4f9a8b7c6d5e!"), "§§secret(K)!");
    assert_eq!(stream.push("hex 736b2d6c"), "hex ");
    assert_eq!(stream.finish(), "736b2d6c");
}

#[test]
fn a_secrets_file_that_cannot_be_read_is_a_typed_error() {
    use crate::layout::ReadErrorKind;
    let dir = tempfile::tempdir().unwrap();
    let e = Secrets::load(dir.path()).unwrap_err();
    assert_eq!(e.kind, ReadErrorKind::NotAFile);
    assert!(e.message.starts_with("cannot read "), "{e}");
    let big = dir.path().join("secrets.env");
    std::fs::write(&big, "KEY=a-long-enough-value\n".repeat(4)).unwrap();
    let e = Secrets::load_capped(&big, 16).unwrap_err();
    assert_eq!(e.kind, ReadErrorKind::TooLarge);
    assert_eq!(e.to_string(), e.message);
    // A missing file is no secrets, not an error.
    assert!(Secrets::load(&dir.path().join("missing.env")).is_ok());
}
