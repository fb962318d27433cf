//! The editor's file system for the agent's file tools: when the client offers
//! `clientCapabilities.fs` in `initialize`, a turn's run reads and writes text through
//! `fs/read_text_file` and `fs/write_text_file` ([`keel::TextFiles`]) — the editor's buffers,
//! unsaved changes included, and edits the editor sees as it makes them. The tools still check
//! every call as they always do (inside the workspace, not `.keel/`, read before edit, sizes);
//! what the client does not offer (reading without writing, say) goes to the disk.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use keel::{TextFiles, ToolError};
use serde_json::json;

use super::rpc::Peer;
use super::wire::{FsCapabilities, ReadTextFileResponse};

/// One session's files, through the client.
pub(super) struct ClientFiles {
    peer: Arc<Peer>,
    session: String,
    offered: FsCapabilities,
}

impl ClientFiles {
    /// The files of `session` as the client offers them; `None` when it offers neither method.
    pub(super) fn offered(
        peer: &Arc<Peer>,
        session: &str,
        offered: FsCapabilities,
    ) -> Option<Arc<dyn TextFiles>> {
        if !offered.read_text_file && !offered.write_text_file {
            return None;
        }
        Some(Arc::new(Self {
            peer: peer.clone(),
            session: session.to_owned(),
            offered,
        }))
    }
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFiles")
            .field("session", &self.session)
            .field("offered", &self.offered)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl TextFiles for ClientFiles {
    async fn read(&self, path: &Path) -> Option<Result<String, ToolError>> {
        if !self.offered.read_text_file {
            return None;
        }
        let params = json!({ "sessionId": self.session, "path": path });
        let read = match self.peer.call("fs/read_text_file", params).await {
            Ok(answer) => serde_json::from_value::<ReadTextFileResponse>(answer)
                .map(|read| read.content)
                .map_err(|e| {
                    ToolError::Io(format!(
                        "the editor's answer to reading `{}` was not understood: {e}",
                        path.display()
                    ))
                }),
            Err(error) => Err(ToolError::Io(format!(
                "the editor could not read `{}`: {}",
                path.display(),
                error.message
            ))),
        };
        Some(read)
    }

    async fn write(&self, path: &Path, content: &str) -> Option<Result<(), ToolError>> {
        if !self.offered.write_text_file {
            return None;
        }
        let params = json!({ "sessionId": self.session, "path": path, "content": content });
        let written = match self.peer.call("fs/write_text_file", params).await {
            Ok(_) => Ok(()),
            Err(error) => Err(ToolError::Io(format!(
                "the editor could not write `{}`: {}",
                path.display(),
                error.message
            ))),
        };
        Some(written)
    }
}
