//! The auth service's error type and its one conversion into a gRPC status.

use latchkey_shared::error::{CodedError, ErrorCode};
use serde_json::json;
use uuid::Uuid;

use crate::domain::settings::Invalid;
use crate::domain::signing::KeyGenError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("project {0} not found")]
    ProjectNotFound(Uuid),
    #[error("key set {0} not found")]
    KeySetNotFound(Uuid),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("settings changed concurrently")]
    Contended,
    #[error("{0}")]
    BadRequest(String),
    #[error("the profile image must be an http(s) URL (servers only) or a base64 image")]
    InvalidProfileImageUrl,
    #[error("password_hash must be a bcrypt hash ($2a$, $2b$ or $2y$)")]
    InvalidPasswordHash,
    /// A rule of the contract with its own code.
    #[error("{0}")]
    Coded(CodedError),
    /// An error another service answered with, passed on as it is.
    #[error("{0}")]
    Upstream(tonic::Status),
    #[error(transparent)]
    Password(#[from] latchkey_shared::password::PasswordError),
    #[error(transparent)]
    Token(#[from] crate::domain::signing::SignError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    KeyGen(#[from] KeyGenError),
    #[error(transparent)]
    Sealed(#[from] latchkey_shared::sealed::SealError),
}

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        Self::Invalid(e.0)
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let coded = match &err {
            Error::ProjectNotFound(id) => {
                CodedError::new(ErrorCode::ProjectNotFound, err.to_string())
                    .with_details(json!({ "project_id": id }))
            }
            Error::KeySetNotFound(id) => {
                CodedError::new(ErrorCode::ApiKeyNotFound, err.to_string())
                    .with_details(json!({ "api_key_id": id }))
            }
            Error::Invalid(message) => CodedError::schema(message.clone()),
            Error::Contended => CodedError::new(
                ErrorCode::ServiceUnavailable,
                "The settings were changed concurrently; try again.",
            ),
            Error::BadRequest(m) => CodedError::new(ErrorCode::BadRequest, m.clone()),
            Error::InvalidProfileImageUrl => {
                CodedError::new(ErrorCode::InvalidProfileImageUrl, err.to_string())
            }
            Error::InvalidPasswordHash => {
                CodedError::new(ErrorCode::InvalidPasswordHash, err.to_string())
            }
            Error::Coded(c) => c.clone(),
            Error::Upstream(status) => return status.clone(),
            Error::Password(e) => {
                tracing::error!(error = %e, "password hashing failed");
                CodedError::internal()
            }
            Error::Token(e) => {
                tracing::error!(error = %e, "token signing failed");
                CodedError::internal()
            }
            Error::Store(StoreError::Db(e)) => CodedError::from_db(e, "auth"),
            Error::Store(e) => {
                tracing::error!(error = ?e, "auth store failed");
                CodedError::internal()
            }
            Error::KeyGen(e) => {
                tracing::error!(error = %e, "key generation failed");
                CodedError::internal()
            }
            Error::Sealed(e) => {
                tracing::error!(error = %e, "a stored secret could not be opened");
                CodedError::internal()
            }
        };
        coded.into_status()
    }
}

impl From<CodedError> for Error {
    fn from(e: CodedError) -> Self {
        Self::Coded(e)
    }
}

impl From<latchkey_shared::codes::CodeError> for Error {
    fn from(e: latchkey_shared::codes::CodeError) -> Self {
        Self::Coded(e.into())
    }
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Self::Upstream(s)
    }
}

/// Shorthand for a coded error.
pub fn coded(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::Coded(CodedError::new(code, message))
}

impl Error {
    /// Adds `details` to a coded error; other errors pass unchanged.
    pub fn with_details(self, details: serde_json::Value) -> Self {
        match self {
            Error::Coded(c) => Error::Coded(c.with_details(details)),
            other => other,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
