//! Whether a tool can run now.

/// A tool's answer to "can you run now?" ([`Tool::readiness`](crate::Tool::readiness)).
///
/// A tool that is not ready is left out of the tools prompt, shown in `toolhost list` with
/// its reason, and a call of it fails at once with that reason (a `dependency` error), so the
/// model is told why instead of getting a failure from deep inside the tool.
///
/// ```
/// use plugin_api::Readiness;
///
/// // A weather tool is ready once its key is configured.
/// fn readiness(api_key: Option<&str>) -> Readiness {
///     match api_key {
///         Some(_) => Readiness::Ready,
///         None => Readiness::not_ready("WEATHER_API_KEY not configured"),
///     }
/// }
///
/// assert!(readiness(Some("k-123")).is_ready());
/// assert_eq!(readiness(Some("k-123")).reason(), None);
/// let missing = readiness(None);
/// assert!(!missing.is_ready());
/// assert_eq!(missing.reason(), Some("WEATHER_API_KEY not configured"));
/// ```
///
/// The enum is `#[non_exhaustive]` (a later release may add a state such as "degraded"): match
/// on it with a wildcard arm, or use [`is_ready`](Self::is_ready) and
/// [`reason`](Self::reason).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// The tool can run.
    #[default]
    Ready,
    /// The tool cannot run, and why (for the user and the model: say what to configure).
    NotReady(String),
}

impl Readiness {
    /// Not ready, for `reason`.
    pub fn not_ready(reason: impl Into<String>) -> Self {
        Self::NotReady(reason.into())
    }

    /// Whether the tool can run.
    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }

    /// Why the tool cannot run, if it cannot.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Ready => None,
            Self::NotReady(reason) => Some(reason),
        }
    }
}
