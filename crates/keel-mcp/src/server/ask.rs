//! Asking the MCP client's user (elicitation): when a call the client made needs a human's
//! approval and the client declared the `elicitation` capability, Keel asks the client's user
//! directly, with a form of one boolean. The durable approval stays the source of truth: the
//! answer decides it like an operator's decision would, and whoever decides first wins.

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction};
use rmcp::service::Peer;
use serde_json::json;

/// A way to ask the user of the client that made a call. Cheap to clone.
#[derive(Clone)]
pub struct Asker {
    peer: Peer<RoleServer>,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Asker")
    }
}

impl Asker {
    pub(crate) fn new(peer: Peer<RoleServer>) -> Self {
        Self { peer }
    }

    /// Asks the user to approve or deny; `Some(true)` approved, `Some(false)` denied (or
    /// declined), `None` when the user cancelled or the client could not ask.
    pub async fn confirm(&self, message: String) -> Option<bool> {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": "Let Keel run this call"
                    }
                },
                "required": ["approve"]
            }
        }))
        .ok()?;
        let answer = match self.peer.create_elicitation(params).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::debug!(%error, "Asking the MCP client's user failed.");
                return None;
            }
        };
        match answer.action {
            ElicitationAction::Accept => answer
                .content
                .as_ref()
                .and_then(|content| content.get("approve"))
                .and_then(serde_json::Value::as_bool),
            ElicitationAction::Decline => Some(false),
            _ => None,
        }
    }
}
