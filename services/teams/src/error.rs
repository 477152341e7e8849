//! The teams service's error type and its one conversion into a gRPC status.

use latchkey_shared::error::{CodedError, ErrorCode};

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A rule of the contract with its own code.
    #[error("{0}")]
    Coded(CodedError),
    /// An error another service answered with, passed on as it is.
    #[error("{0}")]
    Upstream(tonic::Status),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Self::Upstream(s)
    }
}

impl From<latchkey_shared::codes::CodeError> for Error {
    fn from(e: latchkey_shared::codes::CodeError) -> Self {
        Self::Coded(e.into())
    }
}

impl From<CodedError> for Error {
    fn from(e: CodedError) -> Self {
        Self::Coded(e)
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        match err {
            Error::Invalid(m) => CodedError::schema(m).into_status(),
            Error::Coded(c) => c.into_status(),
            Error::Upstream(s) => s,
            Error::Store(StoreError::Db(e)) => CodedError::from_db(&e, "teams").into_status(),
            Error::Store(e) => {
                tracing::error!(error = ?e, "teams store failed");
                CodedError::internal().into_status()
            }
        }
    }
}

pub fn coded(code: ErrorCode, message: impl Into<String>, details: serde_json::Value) -> Error {
    Error::Coded(CodedError::new(code, message).with_details(details))
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
