//! What a tool returns besides its message: content blocks (images, audio, resources, links,
//! more text), in the shape MCP gives them.

use serde::{Deserialize, Serialize};

/// One block of a tool's answer after its [`message`](crate::Response::message).
///
/// Over MCP each block becomes the content block of the same name, after a text block holding
/// the message; a model reads text blocks as text and every other block as a one-line
/// description (its kind, MIME type, size or URI).
///
/// ```
/// use plugin_api::{Content, Response};
///
/// let png: &[u8] = &[0x89, b'P', b'N', b'G'];
/// let r = Response::text("The chart:")
///     .with_content(Content::image(png, "image/png"))
///     .with_content(Content::resource_text("file:///notes.md", "text/markdown", "# Notes"));
/// assert_eq!(r.content.len(), 2);
/// let json = serde_json::to_value(&r.content[0]).unwrap();
/// assert_eq!(json["type"], "image");
/// assert_eq!(json["data"], "iVBORw=="); // base64, as MCP sends it
/// ```
///
/// `#[non_exhaustive]`: a later release may add a kind of block, so a `match` needs a wildcard
/// arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// More text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Its bytes (base64 in JSON).
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
        /// Its MIME type (`image/png`).
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A sound.
    Audio {
        /// Its bytes (base64 in JSON).
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
        /// Its MIME type (`audio/wav`).
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource carried whole.
    Resource {
        /// The resource.
        resource: EmbeddedResource,
    },
    /// A resource named by its URI, for the client to read if it wants to.
    ResourceLink {
        /// Its URI.
        uri: String,
        /// Its name.
        name: String,
        /// What it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its MIME type.
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// A resource inside a [`Content::Resource`] block: its URI, MIME type and text or bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EmbeddedResource {
    /// Its URI.
    pub uri: String,
    /// Its MIME type.
    #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its text, for a text resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its bytes, for a binary resource (base64 in JSON).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "base64_bytes_opt"
    )]
    pub blob: Option<Vec<u8>>,
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An image block.
    pub fn image(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An audio block.
    pub fn audio(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An embedded text resource.
    pub fn resource_text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::Resource {
            resource: EmbeddedResource {
                uri: uri.into(),
                mime_type: Some(mime_type.into()),
                text: Some(text.into()),
                blob: None,
            },
        }
    }

    /// An embedded binary resource.
    pub fn resource_blob(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        blob: impl Into<Vec<u8>>,
    ) -> Self {
        Self::Resource {
            resource: EmbeddedResource {
                uri: uri.into(),
                mime_type: Some(mime_type.into()),
                text: None,
                blob: Some(blob.into()),
            },
        }
    }

    /// A link to a resource.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            description: None,
            mime_type: None,
        }
    }

    /// How a model that reads only text is told about this block: the text of a text block,
    /// one line in brackets for any other (`[image: image/png, 68 bytes]`).
    ///
    /// ```
    /// use plugin_api::Content;
    /// assert_eq!(Content::audio(vec![0; 10], "audio/wav").describe(), "[audio: audio/wav, 10 bytes]");
    /// assert_eq!(Content::resource_link("test://x", "x").describe(), "[resource link: test://x (x)]");
    /// ```
    pub fn describe(&self) -> String {
        match self {
            Self::Text { text } => text.clone(),
            Self::Image { data, mime_type } => {
                format!("[image: {mime_type}, {} bytes]", data.len())
            }
            Self::Audio { data, mime_type } => {
                format!("[audio: {mime_type}, {} bytes]", data.len())
            }
            Self::Resource { resource } => {
                let mime = resource.mime_type.as_deref().unwrap_or("no MIME type");
                match (&resource.text, &resource.blob) {
                    (Some(text), _) => format!("[resource {} ({mime}):\n{text}\n]", resource.uri),
                    (None, Some(blob)) => {
                        format!("[resource {} ({mime}), {} bytes]", resource.uri, blob.len())
                    }
                    (None, None) => format!("[resource {} ({mime})]", resource.uri),
                }
            }
            Self::ResourceLink { uri, name, .. } => format!("[resource link: {uri} ({name})]"),
        }
    }
}

/// Bytes as base64 text in JSON.
mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

/// Optional bytes as base64 text in JSON.
mod base64_bytes_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        bytes: &Option<Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => super::base64_bytes::serialize(bytes, s),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "super::base64_bytes")] Vec<u8>);
        Ok(Option::<Wrapped>::deserialize(d)?.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_have_the_shape_mcp_gives_them_and_read_back() {
        let blocks = vec![
            Content::text("t"),
            Content::image(vec![1, 2, 3], "image/png"),
            Content::audio(vec![4], "audio/wav"),
            Content::resource_text("test://a", "text/plain", "hi"),
            Content::resource_blob("test://b", "image/png", vec![5]),
            Content::resource_link("test://c", "c"),
        ];
        let json = serde_json::to_value(&blocks).unwrap();
        assert_eq!(
            json,
            json!([
                {"type": "text", "text": "t"},
                {"type": "image", "data": "AQID", "mimeType": "image/png"},
                {"type": "audio", "data": "BA==", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "test://a", "mimeType": "text/plain", "text": "hi"}},
                {"type": "resource", "resource": {"uri": "test://b", "mimeType": "image/png", "blob": "BQ=="}},
                {"type": "resource_link", "uri": "test://c", "name": "c"},
            ])
        );
        let back: Vec<Content> = serde_json::from_value(json).unwrap();
        assert_eq!(back, blocks);
    }

    #[test]
    fn bad_base64_is_an_error_not_garbage() {
        let bad = json!({"type": "image", "data": "%%%", "mimeType": "image/png"});
        assert!(serde_json::from_value::<Content>(bad).is_err());
    }
}
