//! The contacts service's error type and its one conversion into a gRPC status.

use latchkey_shared::codes::CodeError;
use latchkey_shared::error::{CodedError, ErrorCode};
use serde_json::json;

use crate::mail::MailError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("the user already has this address")]
    AlreadyExists,
    #[error("the address is used for sign-in by another user")]
    UsedForAuthBySomeoneElse { value: String },
    #[error("the address is already verified")]
    AlreadyVerified,
    #[error("no such contact channel")]
    ChannelNotFound,
    #[error("{email} is not the primary e-mail")]
    NotPrimaryEmail {
        email: String,
        primary: Option<String>,
    },
    #[error("the URL is not trusted by the project")]
    UrlNotTrusted,
    /// An error another service answered with, passed on as it is.
    #[error("{0}")]
    Upstream(tonic::Status),
    #[error(transparent)]
    Code(#[from] CodeError),
    #[error(transparent)]
    Mail(#[from] MailError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let message = err.to_string();
        let coded = match err {
            Error::Invalid(m) => CodedError::schema(m),
            Error::BadRequest(m) => CodedError::new(ErrorCode::BadRequest, m),
            Error::AlreadyExists => {
                CodedError::new(ErrorCode::ContactChannelAlreadyExists, message)
            }
            Error::UsedForAuthBySomeoneElse { value } => CodedError::new(
                ErrorCode::ContactChannelAlreadyUsedForAuthBySomeoneElse,
                message,
            )
            .with_details(json!({
                "type": "email",
                "contact_channel_value": value,
                "would_work_if_email_was_verified": false,
            })),
            Error::AlreadyVerified => CodedError::new(ErrorCode::EmailAlreadyVerified, message),
            Error::ChannelNotFound => CodedError::new(ErrorCode::ContactChannelNotFound, message),
            Error::NotPrimaryEmail { email, primary } => {
                CodedError::new(ErrorCode::EmailIsNotPrimaryEmail, message)
                    .with_details(json!({ "email": email, "primary_email": primary }))
            }
            Error::UrlNotTrusted => CodedError::new(ErrorCode::RedirectUrlNotWhitelisted, message),
            Error::Upstream(status) => return status,
            Error::Code(e) => e.into(),
            Error::Mail(MailError::Address(a)) => {
                CodedError::schema(format!("not a deliverable address: {a}"))
            }
            Error::Mail(e) => {
                tracing::error!(error = %e, "mail failed");
                CodedError::internal()
            }
            Error::Store(StoreError::Db(e)) => CodedError::from_db(&e, "contacts"),
            Error::Store(e) => {
                tracing::error!(error = ?e, "contacts store failed");
                CodedError::internal()
            }
        };
        coded.into_status()
    }
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Self::Upstream(s)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
