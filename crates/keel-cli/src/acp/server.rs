//! The connection: reads the client's messages in order and answers each. `initialize`,
//! `session/new` and `session/load` are answered in turn; a `session/prompt` becomes a turn
//! that runs on its own task (so `session/cancel`, permission answers and other sessions'
//! requests keep flowing meanwhile) and answers when its run has ended. A session answers
//! one prompt at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use keel::{Runtime, SessionId};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::children::ChildApprovals;
use super::prompt::{self, Turn};
use super::rpc::{self, Incoming, Peer, RpcError};
use super::updates;
use super::wire::{
    CancelParams, CancelRequestParams, FsCapabilities, InitializeParams, LoadSessionParams,
    NewSessionParams, PROTOCOL_VERSION, PromptParams,
};

/// What the client said of itself in `initialize`.
#[derive(Debug, Clone)]
struct Client {
    /// Who decides approvals, as recorded (`zed@acp`).
    decided_by: String,
    fs: FsCapabilities,
}

/// A session of this connection.
struct Session {
    id: SessionId,
    /// The turn in progress: its prompt's JSON-RPC id and what cancels it.
    turn: Option<(Value, CancellationToken)>,
    /// Whether a turn ran (its `SessionEnd` hooks run when the connection ends).
    prompted: bool,
}

#[derive(Default)]
struct State {
    client: Option<Client>,
    sessions: HashMap<String, Session>,
}

/// The agent side of one ACP connection.
pub(super) struct Server {
    runtime: Runtime,
    /// The agent every prompt runs.
    agent: String,
    peer: Arc<Peer>,
    /// Where turns learn of their child runs' approvals (observing `runtime`).
    children: Arc<ChildApprovals>,
    state: Mutex<State>,
}

impl Server {
    pub(super) fn new(
        runtime: Runtime,
        agent: String,
        peer: Arc<Peer>,
        children: Arc<ChildApprovals>,
    ) -> Self {
        Self {
            runtime,
            agent,
            peer,
            children,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves the client until it closes stdin or `stop` fires; then cancels the turns in
    /// progress and returns once their runs have ended and every answer is written.
    pub(super) async fn serve(self: Arc<Self>, stop: CancellationToken) {
        let mut lines = rpc::read_stdin();
        let mut turns = JoinSet::new();
        loop {
            let line = tokio::select! {
                line = lines.recv() => line,
                () = stop.cancelled() => None,
            };
            let Some(line) = line else {
                break;
            };
            while turns.try_join_next().is_some() {}
            match line {
                Ok(line) => self.dispatch(&line, &mut turns).await,
                Err(why) => self
                    .peer
                    .respond(Value::Null, Err(RpcError::parse_error(why))),
            }
        }
        let cancels: Vec<CancellationToken> = self
            .state()
            .sessions
            .values()
            .filter_map(|s| s.turn.as_ref().map(|(_, cancel)| cancel.clone()))
            .collect();
        for cancel in cancels {
            cancel.cancel();
        }
        while turns.join_next().await.is_some() {}
        let prompted: Vec<SessionId> = self
            .state()
            .sessions
            .values()
            .filter(|s| s.prompted)
            .map(|s| s.id.clone())
            .collect();
        for session in prompted {
            self.runtime
                .sessions()
                .end(&session, "prompt_input_exit")
                .await;
        }
        self.peer.close().await;
    }

    async fn dispatch(self: &Arc<Self>, line: &str, turns: &mut JoinSet<()>) {
        match rpc::parse(line) {
            Err((id, error)) => self.peer.respond(id, Err(error)),
            Ok(Incoming::Response { id, outcome }) => self.peer.answered(&id, outcome),
            Ok(Incoming::Notification { method, params }) => self.notification(&method, params),
            Ok(Incoming::Request { id, method, params }) if method == "session/prompt" => {
                match self.start_turn(&id, params) {
                    Ok(turn) => {
                        let server = self.clone();
                        turns.spawn(async move {
                            let session = turn.acp_session.clone();
                            let outcome = prompt::run(
                                &server.runtime,
                                &server.agent,
                                &server.peer,
                                &server.children,
                                turn,
                            )
                            .await;
                            server.turn_ended(&session);
                            server.peer.respond(id, outcome);
                        });
                    }
                    Err(error) => self.peer.respond(id, Err(error)),
                }
            }
            Ok(Incoming::Request { id, method, params }) => {
                let outcome = self.request(&method, params).await;
                self.peer.respond(id, outcome);
            }
        }
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        if method == "initialize" {
            return self.initialize(params);
        }
        if self.client().is_none() {
            return Err(RpcError::invalid_request(format!(
                "not initialized: send `initialize` before `{method}`"
            )));
        }
        match method {
            "session/new" => self.new_session(params),
            "session/load" => self.load_session(params).await,
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    fn notification(&self, method: &str, params: Value) {
        match method {
            "session/cancel" => match parse_params::<CancelParams>(params) {
                Ok(cancel) => {
                    let state = self.state();
                    match state.sessions.get(&cancel.session_id) {
                        Some(Session {
                            turn: Some((_, token)),
                            ..
                        }) => token.cancel(),
                        Some(_) => tracing::debug!(
                            session = %cancel.session_id,
                            "Nothing to cancel: the session answers no prompt."
                        ),
                        None => tracing::warn!(
                            session = %cancel.session_id,
                            "A cancel named a session this connection does not have."
                        ),
                    }
                }
                Err(error) => tracing::warn!(%error, "A session/cancel was not understood."),
            },
            "$/cancel_request" => match parse_params::<CancelRequestParams>(params) {
                Ok(cancel) => {
                    for session in self.state().sessions.values() {
                        if let Some((id, token)) = &session.turn
                            && *id == cancel.request_id
                        {
                            token.cancel();
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "A $/cancel_request was not understood."),
            },
            _ => tracing::debug!(
                method,
                "A notification this agent does not take was ignored."
            ),
        }
    }

    fn initialize(&self, params: Value) -> Result<Value, RpcError> {
        let params: InitializeParams = parse_params(params)?;
        let name = params
            .client_info
            .map(|info| info.name)
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| "editor".to_owned());
        self.state().client = Some(Client {
            decided_by: format!("{name}@acp"),
            fs: params.client_capabilities.fs,
        });
        Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": { "image": false, "audio": false, "embeddedContext": true },
                "mcpCapabilities": { "http": false, "sse": false },
            },
            "authMethods": [],
            "agentInfo": {
                "name": "keel",
                "title": format!("Keel ({})", self.agent),
                "version": env!("CARGO_PKG_VERSION"),
            },
        }))
    }

    fn new_session(&self, params: Value) -> Result<Value, RpcError> {
        let params: NewSessionParams = parse_params(params)?;
        check_session_setup(&params.cwd, &params.mcp_servers)?;
        let id = SessionId::generate();
        self.state().sessions.insert(
            id.to_string(),
            Session {
                id: id.clone(),
                turn: None,
                prompted: false,
            },
        );
        Ok(json!({ "sessionId": id }))
    }

    /// `session/load`: the stored session's transcript replayed as updates, then the answer.
    async fn load_session(&self, params: Value) -> Result<Value, RpcError> {
        let params: LoadSessionParams = parse_params(params)?;
        check_session_setup(&params.cwd, &params.mcp_servers)?;
        let id = SessionId::parse(&params.session_id).map_err(RpcError::invalid_params)?;
        let known_here = self.state().sessions.contains_key(id.as_str());
        let stored = self
            .runtime
            .sessions()
            .get(&id)
            .await
            .map_err(RpcError::internal)?;
        if stored.is_none() && !known_here {
            return Err(RpcError::not_found(format!(
                "no session `{id}` in this workspace"
            )));
        }
        let transcript = self
            .runtime
            .sessions()
            .transcript(&id)
            .await
            .map_err(RpcError::internal)?;
        let root = self.runtime.workspace().root.clone();
        for update in updates::replay(&root, &transcript) {
            updates::send(&self.peer, id.as_str(), &update);
        }
        self.state()
            .sessions
            .entry(id.to_string())
            .or_insert(Session {
                id,
                turn: None,
                prompted: false,
            });
        Ok(json!({}))
    }

    /// Claims the session for a prompt's turn.
    fn start_turn(&self, rpc_id: &Value, params: Value) -> Result<Turn, RpcError> {
        let mut state = self.state();
        let Some(client) = state.client.clone() else {
            return Err(RpcError::invalid_request(
                "not initialized: send `initialize` before `session/prompt`",
            ));
        };
        let params: PromptParams = parse_params(params)?;
        let input = prompt::input(&params.prompt)?;
        let Some(session) = state.sessions.get_mut(&params.session_id) else {
            return Err(unknown_session(&params.session_id));
        };
        if session.turn.is_some() {
            return Err(RpcError::invalid_request(format!(
                "session `{}` is already answering a prompt: cancel it (session/cancel) or wait for its answer",
                params.session_id
            )));
        }
        let cancel = CancellationToken::new();
        session.turn = Some((rpc_id.clone(), cancel.clone()));
        session.prompted = true;
        Ok(Turn {
            acp_session: params.session_id,
            session: session.id.clone(),
            input,
            cancel,
            decided_by: client.decided_by,
            fs: client.fs,
        })
    }

    fn turn_ended(&self, session: &str) {
        if let Some(session) = self.state().sessions.get_mut(session) {
            session.turn = None;
        }
    }

    fn client(&self) -> Option<Client> {
        self.state().client.clone()
    }
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::not_found(format!(
        "no session `{id}` on this connection: create one with session/new or load it with session/load"
    ))
}

/// A session's working directory must be absolute (ACP's rule); MCP servers the client
/// offers are not used — the workspace's own `McpServer` documents are the agent's tools.
fn check_session_setup(cwd: &str, mcp_servers: &[Value]) -> Result<(), RpcError> {
    if !std::path::Path::new(cwd).is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "`cwd` must be an absolute path, not `{cwd}`"
        )));
    }
    if !mcp_servers.is_empty() {
        tracing::warn!(
            servers = mcp_servers.len(),
            "The client's MCP servers are not used: the workspace's McpServer documents are."
        );
    }
    Ok(())
}

/// Params as `T`; what does not fit is an invalid-params error naming it.
pub(super) fn parse_params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    if params.is_null() {
        return Err(RpcError::invalid_params("`params` is missing"));
    }
    serde_json::from_value(params).map_err(RpcError::invalid_params)
}
