//! Access headers (00 §2–3): the middleware that runs validation steps 1–8 of 00 §3.1 on every
//! matched route, and the extractors handlers use for step 9 (allowed access types).

pub mod revocations;
pub mod token;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use latchkey_proto::auth::v1::AccessOutcome;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::{self, AccessType};
use serde_json::json;
use uuid::Uuid;

use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::state::AppState;
use token::TokenUser;

/// A request whose access headers passed validation.
#[derive(Debug, Clone)]
pub struct Access {
    pub access_type: AccessType,
    pub project_id: Uuid,
    pub user: Option<TokenUser>,
    pub request_id: Option<String>,
}

impl Access {
    /// The context services receive in gRPC metadata.
    pub fn context(&self) -> Context {
        Context {
            project_id: self.project_id,
            access_type: self.access_type,
            user_id: self.user.as_ref().map(|u| u.user_id),
            request_id: self.request_id.clone(),
        }
    }

    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        self.context().request(message)
    }

    pub fn user_id(&self) -> Option<Uuid> {
        self.user.as_ref().map(|u| u.user_id)
    }

    pub fn session_id(&self) -> Option<Uuid> {
        self.user.as_ref().and_then(|u| u.session_id)
    }

    /// The signed-in user, for endpoints that need one (00 §3.1 step 10).
    pub fn require_user(&self) -> Result<Uuid, ApiError> {
        self.user_id().ok_or_else(|| {
            ApiError::new(
                ErrorCode::UserAuthenticationRequired,
                "This endpoint needs a signed-in user.",
            )
        })
    }

    /// Resolves a user id from a path or query (`me` or a UUID); a client may only name itself.
    pub fn resolve_user(&self, text: &str) -> Result<Uuid, ApiError> {
        let id = if text == "me" {
            self.user_id().ok_or_else(|| {
                ApiError::new(
                    ErrorCode::CannotGetOwnUserWithoutUser,
                    "`me` needs a signed-in user.",
                )
            })?
        } else {
            Uuid::parse_str(text)
                .map_err(|_| ApiError::schema(format!("user_id must be a UUID or `me`: {text}")))?
        };
        if self.access_type == AccessType::Client && Some(id) != self.user_id() {
            if self.user_id().is_none() {
                return Err(ApiError::new(
                    ErrorCode::CannotGetOwnUserWithoutUser,
                    "Sign in first.",
                ));
            }
            return Err(ApiError::new(
                ErrorCode::ClientAccessOwnUserOnly,
                "Clients may only access their own user.",
            ));
        }
        Ok(id)
    }
}

/// Result of steps 1–8: `None` for an unauthenticated request.
#[derive(Debug, Clone)]
struct Validated(Option<Access>);

/// Records the access a request acts with when it was established otherwise than by access
/// headers (a console session), for the rate limiter and the handlers.
pub fn mark(request: &mut Request, access: Option<Access>) {
    request.extensions_mut().insert(Validated(access));
}

/// The access a request was validated with (None: unauthenticated or not validated).
pub fn of_request(request: &Request) -> Option<&Access> {
    request
        .extensions()
        .get::<Validated>()
        .and_then(|v| v.0.as_ref())
}

/// Middleware: validates the access headers and stores the outcome for the extractors.
pub async fn validate(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    let request_id = request.extensions().get::<RequestId>().map(|r| r.0.clone());
    // Signing out with a dead access token still works when a refresh token names the session
    // (80 §11.22); everywhere else a bad token fails the request.
    let sign_out = request.method() == axum::http::Method::DELETE
        && request.uri().path() == "/api/v1/auth/sessions/current"
        && headers::present(request.headers(), headers::REFRESH_TOKEN);
    let mut outcome = validate_headers(&app, request.headers(), request_id.clone()).await;
    if sign_out && matches!(&outcome, Err(e) if e.code() == ErrorCode::AccessTokenExpired) {
        let mut without_token = request.headers().clone();
        for name in headers::all_forms(headers::ACCESS_TOKEN) {
            without_token.remove(name.as_str());
        }
        outcome = validate_headers(&app, &without_token, request_id).await;
    }
    match outcome {
        Ok(access) => {
            request.extensions_mut().insert(Validated(access));
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

fn header<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Result<Option<&'a str>, ()> {
    headers::read(headers, name).map_err(|_| ())
}

/// What the access headers say (00 §3.1 steps 1–4), before anything is checked against stored
/// state; `None` for a request without an access type or key (anonymous).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented<'a> {
    pub access_type: AccessType,
    /// The project id as sent; `project_id` is it parsed, if it parses.
    pub project_text: &'a str,
    pub project_id: Option<Uuid>,
    /// `Err` for a token header that is not readable text.
    pub token: Result<Option<&'a str>, ()>,
    /// Whether the request allows restricted users (the anonymous header allows them too).
    pub allow_restricted: bool,
    /// Whether the request allows anonymous users.
    pub allow_anonymous: bool,
    /// The key for the access type; `None` when its header is absent.
    pub key: Option<&'a str>,
}

/// Reads the access headers under every prefix (steps 1–4 of 00 §3.1).
pub fn presented(headers: &axum::http::HeaderMap) -> Result<Option<Presented<'_>>, ApiError> {
    let key_present = [
        headers::PUBLISHABLE_CLIENT_KEY,
        headers::SECRET_SERVER_KEY,
        headers::SUPER_SECRET_ADMIN_KEY,
    ]
    .iter()
    .any(|h| headers::present(headers, h));
    let access_type = match header(headers, headers::ACCESS_TYPE) {
        Ok(Some(t)) => t,
        // Step 1 and 2. A project id or token alone is an unauthenticated request (80 §11.10).
        Ok(None) if key_present => {
            return Err(ApiError::new(
                ErrorCode::ProjectKeyWithoutAccessType,
                "A project key was sent without an access type.",
            ))
        }
        Ok(None) => return Ok(None),
        Err(()) => "\u{fffd}",
    };
    // Step 3.
    let access_type: AccessType = access_type.parse().map_err(|()| {
        ApiError::new(
            ErrorCode::InvalidAccessType,
            "The access type must be client, server or admin.",
        )
        .with_details(json!({ "access_type": access_type, "accessType": access_type }))
    })?;
    // Step 4.
    let project_text = header(headers, headers::PROJECT_ID)
        .ok()
        .flatten()
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::AccessTypeWithoutProjectId,
                "The project id header is required.",
            )
            .with_details(json!({ "request_type": access_type.as_str() }))
        })?;
    let allows = |h: &str| matches!(header(headers, h), Ok(Some("true")));
    let allow_anonymous = allows(headers::ALLOW_ANONYMOUS_USER);
    let allow_restricted = allow_anonymous || allows(headers::ALLOW_RESTRICTED_USER);
    Ok(Some(Presented {
        access_type,
        project_text,
        project_id: Uuid::parse_str(project_text).ok(),
        token: header(headers, headers::ACCESS_TOKEN),
        allow_restricted,
        allow_anonymous,
        key: header(headers, access_type.key_header()).unwrap_or(Some("")),
    }))
}

async fn validate_headers(
    app: &AppState,
    headers: &axum::http::HeaderMap,
    request_id: Option<String>,
) -> Result<Option<Access>, ApiError> {
    let Some(presented) = presented(headers)? else {
        return Ok(None);
    };
    let Presented {
        access_type,
        project_text,
        project_id,
        ..
    } = presented;
    let project_not_found = || {
        ApiError::new(
            ErrorCode::CurrentProjectNotFound,
            "The project does not exist.",
        )
        .with_details(json!({ "project_id": project_text }))
    };
    // Step 5.
    let user = match presented.token {
        Ok(None) => None,
        Err(()) => {
            return Err(ApiError::new(
                ErrorCode::UnparsableAccessToken,
                "The access token could not be verified.",
            ))
        }
        Ok(Some(token)) => {
            let header_project = project_id.unwrap_or(Uuid::nil());
            let user = app.tokens.verify(token, header_project).await?;
            if user.anonymous && !presented.allow_anonymous {
                return Err(ApiError::new(
                    ErrorCode::AnonymousAuthenticationNotAllowed,
                    "The access token is an anonymous user's; send X-Stack-Allow-Anonymous-User: true where anonymous users are welcome.",
                ));
            }
            if user.restricted && !presented.allow_restricted {
                return Err(ApiError::new(
                    ErrorCode::RestrictedUserNotAllowed,
                    "Restricted users need the allow-restricted-user header.",
                )
                .with_details(json!({ "restricted_reason": user.restricted_reason })));
            }
            // Step 8: sessions ended and users deleted since the token was issued.
            if app
                .revocations
                .is_revoked(user.user_id, user.session_id, user.issued_at_secs)
            {
                return Err(ApiError::new(
                    ErrorCode::AccessTokenExpired,
                    "The session of this access token has ended.",
                )
                .with_details(json!({
                    "expired_at_millis": null,
                    "project_id": project_id,
                    "user_id": user.user_id,
                    "refresh_token_id": user.session_id,
                })));
            }
            Some(user)
        }
    };
    // Step 6 and 7: one call answers both.
    let project_id = project_id.ok_or_else(project_not_found)?;
    let key = presented.key;
    let outcome = app
        .access
        .check(project_id, access_type, key.unwrap_or(""))
        .await?;
    match outcome {
        AccessOutcome::ProjectNotFound => return Err(project_not_found()),
        AccessOutcome::Granted if key.is_some() => {}
        _ => return Err(key_error(access_type, key.is_none(), project_id)),
    }
    Ok(Some(Access {
        access_type,
        project_id,
        user,
        request_id,
    }))
}

fn key_error(access_type: AccessType, missing: bool, project_id: Uuid) -> ApiError {
    let details = json!({ "project_id": project_id });
    match (access_type, missing) {
        (AccessType::Client, true) => ApiError::new(
            ErrorCode::PublishableClientKeyRequiredForProject,
            "Client access needs the publishable client key.",
        )
        .with_details(details),
        (AccessType::Client, false) => ApiError::new(
            ErrorCode::InvalidPublishableClientKey,
            "The publishable client key is not valid.",
        )
        .with_details(details),
        (AccessType::Server, true) => ApiError::new(
            ErrorCode::ServerAuthenticationRequired,
            "Server access needs the secret server key.",
        ),
        (AccessType::Server, false) => ApiError::new(
            ErrorCode::InvalidSecretServerKey,
            "The secret server key is not valid.",
        )
        .with_details(details),
        (AccessType::Admin, true) => ApiError::new(
            ErrorCode::AdminAuthenticationRequired,
            "Admin access needs the super secret admin key.",
        ),
        (AccessType::Admin, false) => ApiError::new(
            ErrorCode::InvalidSuperSecretAdminKey,
            "The super secret admin key is not valid.",
        )
        .with_details(details),
    }
}

fn validated(parts: &Parts) -> Option<Access> {
    parts
        .extensions
        .get::<Validated>()
        .and_then(|v| v.0.clone())
}

fn insufficient(actual: AccessType, allowed: &[AccessType]) -> ApiError {
    ApiError::new(
        ErrorCode::InsufficientAccessType,
        "This endpoint does not allow this access type.",
    )
    .with_details(json!({
        "actual_access_type": actual.as_str(),
        "allowed_access_types": allowed.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
    }))
}

/// Any authenticated access type (C, S, A).
pub struct AnyAccess(pub Access);

/// Authenticated or not (root, public routes).
pub struct MaybeAccess(pub Option<Access>);

/// Admin access only (A).
pub struct AdminAccess(pub Access);

/// Server or admin access (S, A).
pub struct ServerAccess(pub Access);

impl<S: Send + Sync> FromRequestParts<S> for ServerAccess {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let AnyAccess(access) = AnyAccess::from_request_parts(parts, state).await?;
        if access.access_type == AccessType::Client {
            return Err(insufficient(
                access.access_type,
                &[AccessType::Server, AccessType::Admin],
            ));
        }
        Ok(Self(access))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for MaybeAccess {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Ok(Self(validated(parts)))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for AnyAccess {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        validated(parts).map(Self).ok_or_else(|| {
            ApiError::new(
                ErrorCode::AccessTypeRequired,
                "This endpoint needs an access type header.",
            )
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for AdminAccess {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let AnyAccess(access) = AnyAccess::from_request_parts(parts, state).await?;
        if access.access_type != AccessType::Admin {
            return Err(insufficient(access.access_type, &[AccessType::Admin]));
        }
        Ok(Self(access))
    }
}
