//! A `tools/call` result as the model reads it: text; images, audio and blobs as attachments
//! the runtime stores as artifacts; embedded text resources; `structuredContent` when there
//! is no text; `isError` as a tool error.
//!
//! A result can be large (tens of megabytes of text). The SDK holds it decoded once; the
//! mapping moves its strings rather than copying them, and a single text block — the usual
//! large result — becomes the output as it is, so Keel adds no copy of its own before the
//! runtime writes it to an artifact.

use base64::Engine;
use keel_types::{Attachment, ToolError, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// Maps a `CallToolResult` to the model's view, consuming it.
pub(crate) fn render(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let CallToolResult {
        content: blocks,
        structured_content,
        is_error,
        ..
    } = result;
    let mut texts: Vec<String> = Vec::new();
    let mut attachments: Vec<Attachment> = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => texts.push(text.text),
            ContentBlock::Image(image) => attach(
                &mut texts,
                &mut attachments,
                "image",
                image.data,
                image.mime_type,
            ),
            ContentBlock::Audio(audio) => attach(
                &mut texts,
                &mut attachments,
                "audio",
                audio.data,
                audio.mime_type,
            ),
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    texts.push(format!("[resource {uri}]\n{text}"))
                }
                ResourceContents::BlobResourceContents {
                    uri: _,
                    mime_type,
                    blob,
                    ..
                } => {
                    let media = mime_type.unwrap_or_else(|| "application/octet-stream".into());
                    attach(&mut texts, &mut attachments, "resource", blob, media);
                }
                _ => texts.push("[resource of an unknown kind left out]".to_owned()),
            },
            ContentBlock::ResourceLink(link) => texts.push(match link.name.is_empty() {
                true => format!("[resource link {}]", link.uri),
                false => format!("[resource link {}: {}]", link.uri, link.name),
            }),
            // A kind this SDK learns later.
            _ => texts.push("[content of an unknown kind left out]".to_owned()),
        }
    }
    // Servers send structured results as text too (the spec asks them to, in their own
    // words or as JSON): the model reads the text, and the structured value only when the
    // result has no text of its own.
    if let Some(structured) = structured_content.filter(|v| !v.is_null())
        && texts.is_empty()
    {
        texts.push(structured.to_string());
    }
    let content = join(texts);
    if is_error == Some(true) {
        return Err(ToolError::Failed(match content.is_empty() {
            true => "the MCP tool reported an error".to_owned(),
            false => content,
        }));
    }
    Ok(ToolOutput {
        content,
        attachments,
        events: Vec::new(),
    })
}

/// The texts one per line. One text is moved, not copied; several are appended to the first,
/// each freed once appended.
fn join(texts: Vec<String>) -> String {
    let mut texts = texts.into_iter();
    let Some(mut content) = texts.next() else {
        return String::new();
    };
    for text in texts {
        content.push('\n');
        content.push_str(&text);
    }
    content
}

fn attach(
    texts: &mut Vec<String>,
    attachments: &mut Vec<Attachment>,
    kind: &str,
    data: String,
    media_type: String,
) {
    let name = format!("{kind} {}", attachments.len() + 1);
    let decoded = base64::engine::general_purpose::STANDARD.decode(data.trim());
    drop(data);
    match decoded {
        Ok(bytes) => attachments.push(Attachment {
            name,
            media_type,
            data: bytes,
        }),
        Err(error) => texts.push(format!("[{name} ({media_type}) unreadable: {error}]")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn render_json(result: Value) -> Result<ToolOutput, ToolError> {
        render(serde_json::from_value(result).unwrap())
    }

    #[test]
    fn text_image_resource_and_structured_content_are_mapped() {
        let output = render_json(json!({
            "content": [
                { "type": "text", "text": "hello" },
                { "type": "image", "data": "aGk=", "mimeType": "image/png" },
                { "type": "resource", "resource": { "uri": "file:///a.txt", "text": "A" } },
                { "type": "resource_link", "uri": "file:///b", "name": "b" }
            ],
            "structuredContent": { "n": 1 }
        }))
        .unwrap();
        assert_eq!(
            output.content,
            "hello\n[resource file:///a.txt]\nA\n[resource link file:///b: b]"
        );
        assert_eq!(output.attachments.len(), 1);
        assert_eq!(output.attachments[0].data, b"hi");
        assert_eq!(output.attachments[0].media_type, "image/png");
    }

    #[test]
    fn structured_content_is_read_when_there_is_no_text() {
        let with_text = render_json(json!({
            "content": [{ "type": "text", "text": "one" }],
            "structuredContent": { "n": 1 }
        }))
        .unwrap();
        assert_eq!(with_text.content, "one");
        let alone = render_json(json!({ "content": [], "structuredContent": { "n": 1 } }));
        assert_eq!(alone.unwrap().content, "{\"n\":1}");
    }

    #[test]
    fn is_error_becomes_a_tool_error_with_the_text() {
        let error = render_json(json!({
            "content": [{ "type": "text", "text": "no such file" }],
            "isError": true
        }))
        .unwrap_err();
        assert_eq!(error, ToolError::Failed("no such file".into()));
    }

    #[test]
    fn a_single_text_block_is_moved_not_copied() {
        let text = "x".repeat(1 << 20);
        let pointer = text.as_ptr();
        let result = CallToolResult::success(vec![ContentBlock::text(text)]);
        let output = render(result).unwrap();
        assert_eq!(
            output.content.as_ptr(),
            pointer,
            "the output is the block's own string"
        );
    }
}
