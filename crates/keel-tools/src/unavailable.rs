//! Stand-ins for the HTTP tools when the crate is built without its `http` feature: the
//! built-in `http_fetch` and every declared `http` tool keep their names and argument schemas,
//! so a workspace that lists them still loads and the model still sees them, but every call
//! fails saying why. Nothing is sent anywhere.

use async_trait::async_trait;
use keel_types::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use keel_workspace::ToolSpecDoc;
use serde_json::{Value, json};

/// A tool whose implementation was left out of this build.
#[derive(Debug)]
pub struct Unavailable {
    spec: ToolSpec,
}

impl Unavailable {
    /// The built-in `http_fetch`.
    pub fn http_fetch() -> Self {
        Self {
            spec: ToolSpec {
                name: "http_fetch".to_owned(),
                description: "Fetch a URL (not available: this build has no HTTP client tools)."
                    .to_owned(),
                parameters: json!({
                    "type": "object",
                    "properties": { "url": { "type": "string", "minLength": 1 } },
                    "required": ["url"]
                }),
            },
        }
    }

    /// The declared `http` tool `name` described by `doc`.
    pub fn declared_http(name: &str, doc: &ToolSpecDoc) -> Self {
        Self {
            spec: ToolSpec {
                name: name.to_owned(),
                description: doc.description.clone(),
                parameters: doc.schema.clone(),
            },
        }
    }
}

#[async_trait]
impl Tool for Unavailable {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed(format!(
            "tool `{}` is not available: keel-tools was built without its `http` feature",
            self.spec.name
        )))
    }
}
