//! Tool names as the model writes them: `name` or `name:method`.

use plugin_api::ToolError;

/// A checked tool request name.
///
/// A name is one or more of `[A-Za-z0-9_.-]`, does not start with `.` and is not `..`;
/// it may carry one `:method` suffix with the same rules. Anything else (a path separator, an
/// absolute path, `..`) is refused before any file is touched.
///
/// ```
/// use toolhost::ToolName;
///
/// let call = ToolName::parse("search:web").unwrap();
/// assert_eq!((call.name(), call.method()), ("search", Some("web")));
/// assert!(ToolName::parse("../etc/passwd").is_err());
/// assert!(ToolName::parse("a/b").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolName {
    name: String,
    method: Option<String>,
}

impl ToolName {
    /// Parses and checks `name[:method]`; the error is repairable (the model can fix it).
    pub fn parse(raw: &str) -> Result<Self, ToolError> {
        let (name, method) = match raw.split_once(':') {
            Some((name, method)) => (name, Some(method)),
            None => (raw, None),
        };
        check_part(raw, "tool name", name)?;
        if let Some(method) = method {
            check_part(raw, "method", method)?;
        }
        Ok(Self {
            name: name.to_owned(),
            method: method.map(str::to_owned),
        })
    }

    /// The tool's name (the library's file name without extension).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The method of a `name:method` call.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }
}

impl std::fmt::Display for ToolName {
    /// `name` or `name:method`, as requested.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.method {
            Some(method) => write!(f, "{}:{method}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Whether `part` is a safe single file-name component: `[A-Za-z0-9_.-]+`, not starting with `.`.
pub fn is_safe_name(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn check_part(raw: &str, what: &str, part: &str) -> Result<(), ToolError> {
    if is_safe_name(part) {
        return Ok(());
    }
    // Control characters are escaped, so the name is echoed on one line.
    let raw: String = raw
        .chars()
        .map(|c| match c.is_control() {
            true => c.escape_debug().to_string(),
            false => c.to_string(),
        })
        .collect();
    Err(ToolError::repairable(format!(
        "invalid tool name '{raw}': the {what} may use letters, digits, '_', '-' and '.' only \
         (no paths, no '..', not starting with '.'), with at most one ':method' suffix"
    )))
}
