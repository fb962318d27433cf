//! What else servers offer besides tools: prompts (listed for operators, `keel mcp prompts`)
//! and resources, which an agent reads through the `read_mcp_resource` tool — only resources
//! the server lists (no arbitrary URI), only within the server's `maxResourceBytes`.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use keel_types::{Attachment, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use keel_workspace::{McpServerSpec, READ_MCP_RESOURCE_TOOL};
use rmcp::model::ReadResourceRequestParams;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::connect::{json_of, list_pages};
use super::server::{Live, Server};

/// A prompt a server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
}

/// An argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgument {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: Option<bool>,
}

/// A resource a server lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Server {
    async fn ready(self: &Arc<Self>) -> Result<Live, String> {
        self.live(self.startup_timeout()).await
    }

    /// The server's prompts (every page).
    pub(crate) async fn prompts(self: &Arc<Self>) -> Result<Vec<PromptInfo>, String> {
        let live = self.ready().await?;
        list_pages("prompts", |params| {
            let peer = live.peer.clone();
            async move {
                let page = peer
                    .list_prompts(Some(params))
                    .await
                    .map_err(|e| format!("prompts/list failed: {e}"))?;
                json_of(&page)
            }
        })
        .await
    }

    /// The server's resources (every page).
    pub(crate) async fn resources(self: &Arc<Self>) -> Result<Vec<ResourceInfo>, String> {
        let live = self.ready().await?;
        list_pages("resources", |params| {
            let peer = live.peer.clone();
            async move {
                let page = peer
                    .list_resources(Some(params))
                    .await
                    .map_err(|e| format!("resources/list failed: {e}"))?;
                json_of(&page)
            }
        })
        .await
    }

    fn max_resource_bytes(&self) -> u64 {
        self.spec
            .max_resource_bytes
            .unwrap_or(McpServerSpec::DEFAULT_MAX_RESOURCE_BYTES)
    }

    /// Reads a listed resource, within `maxResourceBytes`.
    async fn read(self: &Arc<Self>, uri: &str) -> Result<ToolOutput, ToolError> {
        let listed = self.resources().await.map_err(ToolError::Failed)?;
        if !listed.iter().any(|r| r.uri == uri) {
            return Err(ToolError::InvalidArguments(format!(
                "MCP server `{}` lists no resource `{uri}`; it lists {} resource(s)",
                self.name,
                listed.len()
            )));
        }
        let live = self.ready().await.map_err(ToolError::Failed)?;
        let result = tokio::time::timeout(
            self.call_timeout(),
            live.peer.read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await
        .map_err(|_| ToolError::Timeout(self.call_timeout()))?
        .map_err(|e| ToolError::Failed(format!("MCP server `{}`: {e}", self.name)))?;
        let value = json_of(&result).map_err(ToolError::Failed)?;
        let cap = self.max_resource_bytes();
        let mut texts = Vec::new();
        let mut attachments = Vec::new();
        let mut total: u64 = 0;
        for content in value["contents"].as_array().into_iter().flatten() {
            let media = content["mimeType"].as_str().map(str::to_owned);
            if let Some(text) = content["text"].as_str() {
                total += text.len() as u64;
                if total > cap {
                    return Err(too_large(&self.name, uri, cap));
                }
                texts.push(text.to_owned());
            } else if let Some(blob) = content["blob"].as_str() {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(blob.trim())
                    .map_err(|e| ToolError::Failed(format!("unreadable blob: {e}")))?;
                total += bytes.len() as u64;
                if total > cap {
                    return Err(too_large(&self.name, uri, cap));
                }
                attachments.push(Attachment {
                    name: format!("resource {}", attachments.len() + 1),
                    media_type: media.unwrap_or_else(|| "application/octet-stream".into()),
                    data: bytes,
                });
            }
        }
        Ok(ToolOutput {
            content: texts.join("\n"),
            attachments,
            events: Vec::new(),
        })
    }
}

fn too_large(server: &str, uri: &str, cap: u64) -> ToolError {
    ToolError::Failed(format!(
        "resource `{uri}` of MCP server `{server}` is larger than its maxResourceBytes ({cap} bytes)"
    ))
}

/// `read_mcp_resource {server, uri}`: reads a resource a configured server lists.
pub(crate) struct ReadResource {
    servers: Vec<Arc<Server>>,
    spec: ToolSpec,
}

impl ReadResource {
    pub(crate) fn new(servers: Vec<Arc<Server>>) -> Self {
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        let spec = ToolSpec {
            name: READ_MCP_RESOURCE_TOOL.to_owned(),
            description: "Read a resource that one of the configured MCP servers lists, by its \
                          URI. Only listed resources can be read, within a size limit."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": { "type": "string", "enum": names, "description": "the MCP server" },
                    "uri": { "type": "string", "minLength": 1, "description": "the resource's URI as the server lists it" }
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
        };
        Self { servers, spec }
    }
}

#[async_trait]
impl Tool for ReadResource {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, _: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let (Some(name), Some(uri)) = (args["server"].as_str(), args["uri"].as_str()) else {
            return Err(ToolError::InvalidArguments(
                "`server` and `uri` are required".into(),
            ));
        };
        let Some(server) = self.servers.iter().find(|s| s.name == name) else {
            return Err(ToolError::InvalidArguments(format!(
                "no MCP server `{name}`"
            )));
        };
        server.read(uri).await
    }
}
