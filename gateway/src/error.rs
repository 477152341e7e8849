//! `ApiError`: the only place HTTP error responses are made (00 §4). Service statuses arrive
//! here through `CodedError::from_status`.

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use latchkey_shared::error::{CodedError, ErrorCode};
use latchkey_shared::headers;
use serde_json::{json, Value};

#[derive(Debug, Clone)]
pub struct ApiError(pub CodedError, Option<StatusCode>);

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(CodedError::new(code, message), None)
    }

    pub fn with_details(self, details: Value) -> Self {
        Self(self.0.with_details(details), self.1)
    }

    pub fn schema(message: impl Into<String>) -> Self {
        Self(CodedError::schema(message), None)
    }

    /// An oversized body: 413 with code `BAD_REQUEST` (70 §6).
    pub fn too_large() -> Self {
        Self(
            CodedError::new(ErrorCode::BadRequest, "The request body is too large."),
            Some(StatusCode::PAYLOAD_TOO_LARGE),
        )
    }

    /// A body that stopped arriving: 408 with code `BAD_REQUEST`, like the oversized one.
    pub fn body_timeout() -> Self {
        Self(
            CodedError::new(
                ErrorCode::BadRequest,
                "The request body did not arrive in time.",
            ),
            Some(StatusCode::REQUEST_TIMEOUT),
        )
    }

    pub fn body_parsing(message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(ErrorCode::BodyParsingError, message.clone())
            .with_details(json!({ "message": message }))
    }

    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        self.1.unwrap_or_else(|| {
            StatusCode::from_u16(self.0.code.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        })
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        let coded = CodedError::from_status(&status);
        if coded.code == ErrorCode::InternalServerError {
            tracing::error!(grpc_code = ?status.code(), message = status.message(), "service call failed");
        }
        Self(coded, None)
    }
}

impl From<CodedError> for ApiError {
    fn from(e: CodedError) -> Self {
        Self(e, None)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.0.code;
        let status = self.status();
        let mut body = json!({ "code": code.wire(), "error": self.0.message });
        if let Some(details) = self.0.details {
            body["details"] = details;
        }
        let mut response = (status, Json(body)).into_response();
        // SDKs honour Retry-After only on a 429 without the known-error header (80 §11.20).
        if code != ErrorCode::RateLimited {
            for name in headers::all_forms(headers::KNOWN_ERROR) {
                if let (Ok(name), Ok(value)) = (
                    HeaderName::try_from(name),
                    HeaderValue::from_str(code.wire()),
                ) {
                    response.headers_mut().insert(name, value);
                }
            }
        }
        // A backing service lost or draining: worth trying again in a moment (a replica that
        // died takes its in-flight calls with it; the next call goes to another).
        if code == ErrorCode::ServiceUnavailable {
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
        }
        response.extensions_mut().insert(code);
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
