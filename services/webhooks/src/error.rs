//! The webhooks service's one error type and its mapping to gRPC.

use latchkey_shared::error::{CodedError, ErrorCode};
use serde_json::json;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("webhook endpoint {0} not found")]
    EndpointNotFound(Uuid),
    #[error("no delivery of message {0} to this endpoint")]
    DeliveryNotFound(String),
    #[error("the URL is not allowed: {reason}")]
    UrlNotAllowed { url: String, reason: String },
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let coded = match &err {
            Error::Invalid(message) => CodedError::schema(message.clone()),
            Error::EndpointNotFound(id) => {
                CodedError::new(ErrorCode::WebhookEndpointNotFound, err.to_string())
                    .with_details(json!({ "endpoint_id": id }))
            }
            Error::DeliveryNotFound(_) => CodedError::new(ErrorCode::NotFound, err.to_string()),
            Error::UrlNotAllowed { url, reason } => {
                CodedError::new(ErrorCode::WebhookUrlNotAllowed, err.to_string())
                    .with_details(json!({ "url": url, "reason": reason }))
            }
            Error::Db(e) => CodedError::from_db(e, "webhooks"),
        };
        coded.into()
    }
}
