//! The CLI's one error type and the exit codes it stands for.
//!
//! Every command returns `Result<_, CliError>`; [`CliError::report`] is the one place that
//! prints an error and turns it into an exit code: 1 failed, 2 usage or configuration error,
//! 130 cancelled (Ctrl-C), 143 cancelled by SIGTERM (0, and `keel policy check`'s 3, are
//! successes).
//!
//! There is deliberately no `From<keel::Error>`: the same SDK error is a usage error from
//! `Runtime::request` (an unknown agent) and a failure from `Runtime::tasks().get` (the store),
//! so each call site says which with [`CliError::usage`] or [`CliError::failed`].

use keel::LoadError;
use keel_types::StoreError;

use crate::out;

/// Exit code of a failed command or run.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit code of a usage or configuration error.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code of a run cancelled by Ctrl-C (SIGINT), as a shell reports a process it killed.
pub(crate) const EXIT_CANCELLED: u8 = 130;
/// Exit code of a run cancelled by SIGTERM (128 + 15).
pub(crate) const EXIT_TERMINATED: u8 = 143;

/// Why a command did not succeed.
#[derive(Debug)]
pub(crate) enum CliError {
    /// Bad arguments, or something the workspace does not have (exit 2); printed `error: …`.
    Usage(String),
    /// The workspace failed to load (exit 2): a broken one lists every problem as is, a
    /// missing one is printed `error: …`.
    Workspace(LoadError),
    /// The command, or the run it started, failed (exit 1); printed `error: …`.
    Failed(String),
    /// The run was cancelled (exit 130); nothing more to say.
    Cancelled,
    /// The run was cancelled because the process got SIGTERM (exit 143).
    Terminated,
    /// Exit with this code and print nothing: what went wrong is already on the terminal (a
    /// replay's divergence, each chat turn's error) or there is nothing to add.
    Silent(u8),
}

impl CliError {
    /// A usage or configuration error with this message.
    pub(crate) fn usage(message: impl ToString) -> Self {
        Self::Usage(message.to_string())
    }

    /// A failure with this message.
    pub(crate) fn failed(message: impl ToString) -> Self {
        Self::Failed(message.to_string())
    }

    /// The exit code.
    pub(crate) fn code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Workspace(_) => EXIT_USAGE,
            Self::Failed(_) => EXIT_FAILED,
            Self::Cancelled => EXIT_CANCELLED,
            Self::Terminated => EXIT_TERMINATED,
            Self::Silent(code) => *code,
        }
    }

    /// Prints the error (when there is anything to print) and returns its exit code.
    pub(crate) fn report(&self) -> u8 {
        match self {
            Self::Usage(message) | Self::Failed(message) => out::error(message),
            Self::Workspace(error @ LoadError::Invalid(_)) => out::status(&error.to_string()),
            Self::Workspace(error) => out::error(&error.to_string()),
            Self::Cancelled | Self::Terminated | Self::Silent(_) => {}
        }
        self.code()
    }
}

impl From<LoadError> for CliError {
    fn from(error: LoadError) -> Self {
        Self::Workspace(error)
    }
}

/// A name outside a closed set (`--mode yolo`) is the user's mistake.
impl From<keel_types::UnknownName> for CliError {
    fn from(error: keel_types::UnknownName) -> Self {
        Self::usage(error)
    }
}

/// A session id outside the one rule is the user's mistake.
impl From<keel_types::InvalidSessionId> for CliError {
    fn from(error: keel_types::InvalidSessionId) -> Self {
        Self::usage(error)
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        Self::failed(error)
    }
}

impl From<serde_json::Error> for CliError {
    fn from(error: serde_json::Error) -> Self {
        Self::failed(error)
    }
}
