//! Every kind of mistake gives one line naming the file, the line and the key.

use super::*;

#[test]
fn unknown_key_names_file_line_and_expected_keys() {
    let dev = "# dev profile\n\n[calls]\ntimeout = 3\n";
    assert_eq!(
        error(&[(DEV, dev)]),
        "usr/agents/dev/toolhost.toml:4: unknown key `timeout` in [calls] (expected one of: \
         timeout_seconds, max_retries, backoff_ms, backoff_max_ms)"
    );
    let tool = "[tools.weather]\ntimeout_seconds = 3\npolcy = \"deny\"\n";
    assert_eq!(
        error(&[(GLOBAL, tool)]),
        "usr/toolhost.toml:3: unknown key `polcy` in [tools.weather] (expected one of: \
         timeout_seconds, max_retries, policy, mcp_policy, grant, sandbox)"
    );
    assert_eq!(
        error(&[(
            GLOBAL,
            "[limits]\nmax_output = 10\n\n[call]\nmax_retries = 1\n"
        )]),
        "usr/toolhost.toml:4: unknown table `call` (expected one of: limits, calls, \
         breaker, policy, tools, access, audit, isolate, isolation, pinning, packages, sandbox, \
         telemetry)"
    );
    let err = load(&root(&[(GLOBAL, "verbose = true\n")])).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::UnknownKey);
    assert_eq!(err.line, Some(1));
}

#[test]
fn bad_enum_value_names_key_value_and_choices() {
    let text = "[calls]\nmax_retries = 1\n\n\n\n\n\n[policy]\nexec = \"maybe\"\n";
    assert_eq!(
        error(&[(GLOBAL, text)]),
        "usr/toolhost.toml:9: [policy] exec = \"maybe\": expected \"allow\", \"ask\" or \
         \"deny\""
    );
    assert_eq!(
        error(&[(DEV, "[tools.\"my.tool\"]\npolicy = \"always\"\n")]),
        "usr/agents/dev/toolhost.toml:2: [tools.\"my.tool\"] policy = \"always\": expected \
         \"allow\", \"ask\" or \"deny\""
    );
}

#[test]
fn bad_types_name_key_value_and_expected_type() {
    let cases = [
        (
            "[limits]\nmax_output = \"big\"\n",
            "2: [limits] max_output = \"big\": expected a whole number of bytes, 1 or more",
        ),
        (
            "[calls]\nmax_retries = 1.5\n",
            "2: [calls] max_retries = 1.5: expected a whole number, 0 or more",
        ),
        (
            "[calls]\nmax_retries = -1\n",
            "2: [calls] max_retries = -1: expected a whole number, 0 or more",
        ),
        (
            "[breaker]\nfailures = 0\n",
            "2: [breaker] failures = 0: expected a whole number, 1 or more",
        ),
        (
            "[audit]\nenabled = \"yes\"\n",
            "2: [audit] enabled = \"yes\": expected true or false",
        ),
        (
            "[access]\nallow = \"weather\"\n",
            "2: [access] allow = \"weather\": expected an array",
        ),
        (
            "[access]\ndeny = [\"shell\", \"cap:\"]\n",
            "2: [access] deny = \"cap:\": expected a tool name or cap:<capability tag>",
        ),
        ("calls = 5\n", "1: calls = 5: expected a table"),
        (
            "[tools]\nw = { policy = { a = 1 } }\n",
            "2: [tools.w] policy = { a = 1 }: expected \"allow\", \"ask\" or \"deny\"",
        ),
        (
            "[calls]\nmax_retries = 4294967296\n",
            "2: [calls] max_retries = 4294967296: expected a whole number, at most 4294967295",
        ),
    ];
    for (text, want) in cases {
        let err = load(&root(&[(GLOBAL, text)])).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("usr/toolhost.toml:{want}"),
            "{text}"
        );
        assert_eq!(err.kind(), ConfigErrorKind::InvalidValue);
    }
}

#[test]
fn zero_or_negative_timeouts_are_errors() {
    let expected = "expected a number of seconds from 0.001 to 1000000000 (0.5 is half a second)";
    for value in ["0", "-1", "0.0", "-0.5", "-0.0"] {
        let text = format!("[calls]\ntimeout_seconds = {value}\n");
        let want = format!(
            "usr/toolhost.toml:2: [calls] timeout_seconds = {value}: {expected}: not \
             greater than 0"
        );
        assert_eq!(error(&[(GLOBAL, &text)]), want);
    }
    let text = "[tools.weather]\ntimeout_seconds = 0\n";
    let want = format!(
        "usr/toolhost.toml:2: [tools.weather] timeout_seconds = 0: {expected}: not greater \
         than 0"
    );
    assert_eq!(error(&[(GLOBAL, text)]), want);
    let text = "[breaker]\ncooldown_seconds = 0\n";
    assert!(error(&[(GLOBAL, text)]).contains("[breaker] cooldown_seconds = 0: expected"));
}

/// Every numeric key of `toolhost.toml`, each with the extremes: `nan`, `inf`, `-inf`, `-0`,
/// `1e-300`, `1e300`, `u64::MAX`, a negative number and a string are refused through the real
/// loader with one line naming the file, the line and the key (and the bound, where the value
/// is past it), and never panic; the largest value each key accepts loads and gives a duration
/// an `Instant` can be moved by.
#[test]
fn every_numeric_key_refuses_the_extremes_with_one_line() {
    let keys = [
        ("calls", "timeout_seconds"),
        ("calls", "max_retries"),
        ("calls", "backoff_ms"),
        ("calls", "backoff_max_ms"),
        ("breaker", "failures"),
        ("breaker", "cooldown_seconds"),
        ("breaker", "half_open_calls"),
        ("limits", "max_output"),
        ("limits", "init_seconds"),
        ("isolation", "memory_mb"),
        ("isolation", "cpu_seconds"),
        ("isolation", "grace_ms"),
        ("tools.weather", "timeout_seconds"),
        ("tools.weather", "max_retries"),
    ];
    let u64_max = u64::MAX.to_string();
    let extremes = [
        "nan", "+nan", "inf", "-inf", "-0.0", "1e-300", "1e-10", "1e300", "1e19", &u64_max, "-1",
        "\"30\"",
    ];
    for (table, key) in keys {
        for value in extremes {
            let text = format!("# numbers\n[{table}]\n{key} = {value}\n");
            let result = std::panic::catch_unwind(|| load(&root(&[(GLOBAL, &text)])));
            let Ok(result) = result else {
                panic!("[{table}] {key} = {value} panicked the loader");
            };
            // Every key counts something: none of these values is a count or a length either
            // (a whole-number key refuses `-0.0` as a float).
            let Err(error) = result else {
                panic!("[{table}] {key} = {value} was accepted");
            };
            let line = error.to_string();
            assert!(!line.contains('\n'), "{line}");
            // u64::MAX is past TOML's integers: a syntax error on its line, naming the file.
            let place = "usr/toolhost.toml:3";
            assert!(line.starts_with(place), "{key} = {value}: {line}");
            if value != u64_max {
                assert!(line.contains(&format!("{key} = {value}")), "{line}");
            }
        }
    }
    // The seconds keys name the bound when a value is past it, or rounds to zero.
    for key in ["[calls]\ntimeout_seconds", "[breaker]\ncooldown_seconds"] {
        let line = error(&[(GLOBAL, &format!("{key} = 1e19\n"))]);
        assert!(
            line.ends_with("above the most, 1000000000 s (about 31 years)"),
            "{line}"
        );
        let line = error(&[(GLOBAL, &format!("{key} = 1e-10\n"))]);
        assert!(
            line.ends_with("below 0.001 s, which rounds to no time at all"),
            "{line}"
        );
        let line = error(&[(GLOBAL, &format!("{key} = nan\n"))]);
        assert!(line.ends_with("not a finite number"), "{line}");
        let line = error(&[(GLOBAL, &format!("{key} = -0\n"))]);
        assert!(line.ends_with("not greater than 0"), "{line}");
    }
    let line = error(&[(GLOBAL, "[calls]\nbackoff_ms = 1000000000001\n")]);
    assert!(line.ends_with("at most 1000000000000"), "{line}");
    // The most each duration key takes loads, and can be added to an Instant.
    let most = "[calls]\ntimeout_seconds = 1e9\nbackoff_ms = 1000000000000\n\
                backoff_max_ms = 1000000000000\n[breaker]\ncooldown_seconds = 1000000000\n\
                [isolation]\ngrace_ms = 1000000000000\n";
    let config = load(&root(&[(GLOBAL, most)])).unwrap();
    let now = std::time::Instant::now();
    for duration in [
        config.timeout("weather", std::time::Duration::ZERO),
        config.backoff().max,
        config.breaker().cooldown,
        config.isolation().grace,
    ] {
        assert_eq!(duration, crate::config::numbers::MAX_DURATION);
        assert!(now.checked_add(duration).is_some());
    }
}

#[test]
fn syntax_error_names_file_and_line() {
    let err = load(&root(&[(DEV, "[calls]\nmax_retries = 1\n[policy\n")])).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Syntax);
    assert_eq!(err.line, Some(3));
    let line = err.to_string();
    assert!(
        line.starts_with("usr/agents/dev/toolhost.toml:3: invalid TOML: "),
        "{line}"
    );
    assert!(!line.contains('\n'));
    let err = load(&root(&[(GLOBAL, "a = 1\na = 2\n")])).unwrap_err();
    assert_eq!(
        (err.kind(), err.line),
        (ConfigErrorKind::Syntax, Some(2)),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn fifo_and_directory_are_refused() {
    let dir = root(&[]);
    fs::create_dir_all(dir.path().join("usr/agents/dev/toolhost.toml")).unwrap();
    let err = load(&dir).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::NotAFile);
    assert_eq!(
        err.to_string(),
        "usr/agents/dev/toolhost.toml: a directory, not a regular file; remove it, or put a \
         TOML configuration file there"
    );
    let fifo = dir.path().join(GLOBAL);
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let err = load(&dir).unwrap_err(); // returns: a FIFO is never opened
    assert_eq!(err.kind(), ConfigErrorKind::NotAFile);
    assert!(
        err.to_string()
            .starts_with("usr/toolhost.toml: a named pipe (FIFO)"),
        "{err}"
    );
}

#[test]
fn a_file_over_the_cap_is_refused() {
    let dir = root(&[(GLOBAL, &format!("# {}\n", "x".repeat(100)))]);
    let err = Config::load(&Layout::new(dir.path()), "dev", 64).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::TooLarge);
    assert!(
        err.to_string()
            .starts_with("usr/toolhost.toml: the file is 103 bytes"),
        "{err}"
    );
}

#[test]
fn an_unsafe_profile_name_is_refused() {
    let err = Config::load(&Layout::new("/nonexistent"), "../x", CAP).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidProfile);
}
