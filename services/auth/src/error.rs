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
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    KeyGen(#[from] KeyGenError),
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
            Error::Store(e) => {
                tracing::error!(error = ?e, "auth store failed");
                CodedError::internal()
            }
            Error::KeyGen(e) => {
                tracing::error!(error = %e, "key generation failed");
                CodedError::internal()
            }
        };
        coded.into_status()
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
