//! The table of every error code in the contract (00 §4, 80 §11.8) and the one way an error
//! crosses the gRPC hop: a `tonic::Status` whose code follows the HTTP status and whose details
//! carry the wire code plus the envelope's `details` object as JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tonic::{Code, Status};

macro_rules! error_codes {
    ($($variant:ident => ($wire:literal, $status:literal),)*) => {
        /// Every machine-readable error code Latchkey answers with.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)*
        }

        impl ErrorCode {
            /// All codes, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// Wire name and HTTP status live in this one table; nothing else decides them.
            pub const fn meta(self) -> (&'static str, u16) {
                match self {
                    $(ErrorCode::$variant => ($wire, $status),)*
                }
            }

            pub fn from_wire(name: &str) -> Option<Self> {
                match name {
                    $($wire => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    BodyParsingError => ("BODY_PARSING_ERROR", 400),
    SchemaError => ("SCHEMA_ERROR", 400),
    ProjectKeyWithoutAccessType => ("PROJECT_KEY_WITHOUT_ACCESS_TYPE", 401),
    AccessTypeRequired => ("ACCESS_TYPE_REQUIRED", 401),
    InvalidAccessType => ("INVALID_ACCESS_TYPE", 401),
    AccessTypeWithoutProjectId => ("ACCESS_TYPE_WITHOUT_PROJECT_ID", 401),
    CurrentProjectNotFound => ("CURRENT_PROJECT_NOT_FOUND", 401),
    InsufficientAccessType => ("INSUFFICIENT_ACCESS_TYPE", 401),
    PublishableClientKeyRequiredForProject => ("PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT", 401),
    InvalidPublishableClientKey => ("INVALID_PUBLISHABLE_CLIENT_KEY", 401),
    ServerAuthenticationRequired => ("SERVER_AUTHENTICATION_REQUIRED", 401),
    InvalidSecretServerKey => ("INVALID_SECRET_SERVER_KEY", 401),
    AdminAuthenticationRequired => ("ADMIN_AUTHENTICATION_REQUIRED", 401),
    InvalidSuperSecretAdminKey => ("INVALID_SUPER_SECRET_ADMIN_KEY", 401),
    UnparsableAccessToken => ("UNPARSABLE_ACCESS_TOKEN", 401),
    AccessTokenExpired => ("ACCESS_TOKEN_EXPIRED", 401),
    InvalidProjectForAccessToken => ("INVALID_PROJECT_FOR_ACCESS_TOKEN", 401),
    RestrictedUserNotAllowed => ("RESTRICTED_USER_NOT_ALLOWED", 403),
    CannotGetOwnUserWithoutUser => ("CANNOT_GET_OWN_USER_WITHOUT_USER", 401),
    UserAuthenticationRequired => ("USER_AUTHENTICATION_REQUIRED", 401),
    RefreshTokenNotFoundOrExpired => ("REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED", 401),
    CannotDeleteCurrentSession => ("CANNOT_DELETE_CURRENT_SESSION", 400),
    UserEmailAlreadyExists => ("USER_EMAIL_ALREADY_EXISTS", 409),
    UserIdDoesNotExist => ("USER_ID_DOES_NOT_EXIST", 400),
    UserNotFound => ("USER_NOT_FOUND", 404),
    SignUpNotEnabled => ("SIGN_UP_NOT_ENABLED", 400),
    PasswordAuthenticationNotEnabled => ("PASSWORD_AUTHENTICATION_NOT_ENABLED", 400),
    EmailPasswordMismatch => ("EMAIL_PASSWORD_MISMATCH", 400),
    RedirectUrlNotWhitelisted => ("REDIRECT_URL_NOT_WHITELISTED", 400),
    PasswordTooShort => ("PASSWORD_TOO_SHORT", 400),
    PasswordTooLong => ("PASSWORD_TOO_LONG", 400),
    UserDoesNotHavePassword => ("USER_DOES_NOT_HAVE_PASSWORD", 400),
    PasswordConfirmationMismatch => ("PASSWORD_CONFIRMATION_MISMATCH", 400),
    VerificationCodeNotFound => ("VERIFICATION_CODE_NOT_FOUND", 404),
    VerificationCodeExpired => ("VERIFICATION_CODE_EXPIRED", 400),
    VerificationCodeAlreadyUsed => ("VERIFICATION_CODE_ALREADY_USED", 409),
    VerificationCodeMaxAttemptsReached => ("VERIFICATION_CODE_MAX_ATTEMPTS_REACHED", 400),
    EmailAlreadyVerified => ("EMAIL_ALREADY_VERIFIED", 409),
    EmailIsNotPrimaryEmail => ("EMAIL_IS_NOT_PRIMARY_EMAIL", 400),
    MultiFactorAuthenticationRequired => ("MULTI_FACTOR_AUTHENTICATION_REQUIRED", 400),
    InvalidTotpCode => ("INVALID_TOTP_CODE", 400),
    TeamNotFound => ("TEAM_NOT_FOUND", 404),
    TeamMembershipNotFound => ("TEAM_MEMBERSHIP_NOT_FOUND", 404),
    TeamMembershipAlreadyExists => ("TEAM_MEMBERSHIP_ALREADY_EXISTS", 409),
    TeamInvitationRestrictedUserNotAllowed => ("TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED", 403),
    TeamPermissionRequired => ("TEAM_PERMISSION_REQUIRED", 403),
    ProjectPermissionRequired => ("PROJECT_PERMISSION_REQUIRED", 403),
    TeamPermissionNotFound => ("TEAM_PERMISSION_NOT_FOUND", 404),
    PermissionNotFound => ("PERMISSION_NOT_FOUND", 404),
    WrongPermissionScope => ("WRONG_PERMISSION_SCOPE", 404),
    ContainedPermissionNotFound => ("CONTAINED_PERMISSION_NOT_FOUND", 400),
    PermissionIdAlreadyExists => ("PERMISSION_ID_ALREADY_EXISTS", 400),
    ContactChannelAlreadyUsedForAuthBySomeoneElse => ("CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE", 409),
    OauthProviderNotFoundOrNotEnabled => ("OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED", 400),
    InvalidOauthClientIdOrSecret => ("INVALID_OAUTH_CLIENT_ID_OR_SECRET", 400),
    InvalidScope => ("INVALID_SCOPE", 400),
    InvalidAuthorizationCode => ("INVALID_AUTHORIZATION_CODE", 400),
    OuterOauthTimeout => ("OUTER_OAUTH_TIMEOUT", 408),
    OauthProviderAccessDenied => ("OAUTH_PROVIDER_ACCESS_DENIED", 400),
    OauthProviderTemporarilyUnavailable => ("OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE", 503),
    OauthExtraScopeNotAvailableWithSharedOauthKeys => ("OAUTH_EXTRA_SCOPE_NOT_AVAILABLE_WITH_SHARED_OAUTH_KEYS", 400),
    OauthConnectionAlreadyConnectedToAnotherUser => ("OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER", 409),
    OauthConnectionNotConnectedToUser => ("OAUTH_CONNECTION_NOT_CONNECTED_TO_USER", 400),
    OauthAccessTokenNotAvailable => ("OAUTH_ACCESS_TOKEN_NOT_AVAILABLE", 400),
    OauthConnectionDoesNotHaveRequiredScope => ("OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE", 400),
    OauthAccessTokenNotAvailableWithSharedOauthKeys => ("OAUTH_ACCESS_TOKEN_NOT_AVAILABLE_WITH_SHARED_OAUTH_KEYS", 400),
    OauthProviderAccountIdAlreadyUsedForSignIn => ("OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN", 400),
    ProjectNotFound => ("PROJECT_NOT_FOUND", 404),
    BadRequest => ("BAD_REQUEST", 400),
    PasswordAlreadySet => ("PASSWORD_ALREADY_SET", 400),
    InvalidPasswordHash => ("INVALID_PASSWORD_HASH", 400),
    InvalidProfileImageUrl => ("INVALID_PROFILE_IMAGE_URL", 400),
    OtpSignInNotEnabled => ("OTP_SIGN_IN_NOT_ENABLED", 403),
    ClientTeamCreationDisabled => ("CLIENT_TEAM_CREATION_DISABLED", 403),
    ClientUserDeletionDisabled => ("CLIENT_USER_DELETION_DISABLED", 400),
    ClientAccessOwnUserOnly => ("CLIENT_ACCESS_OWN_USER_ONLY", 403),
    SessionNotFound => ("SESSION_NOT_FOUND", 404),
    ContactChannelNotFound => ("CONTACT_CHANNEL_NOT_FOUND", 404),
    ContactChannelAlreadyExists => ("CONTACT_CHANNEL_ALREADY_EXISTS", 400),
    OauthProviderRecordNotFound => ("OAUTH_PROVIDER_RECORD_NOT_FOUND", 404),
    InvalidOauthState => ("INVALID_OAUTH_STATE", 400),
    RedirectUriMismatch => ("REDIRECT_URI_MISMATCH", 400),
    OauthInvalidRequest => ("OAUTH_INVALID_REQUEST", 400),
    NotFound => ("NOT_FOUND", 404),
    MethodNotAllowed => ("METHOD_NOT_ALLOWED", 405),
    RateLimited => ("RATE_LIMITED", 429),
    InternalServerError => ("INTERNAL_SERVER_ERROR", 500),
    PasswordTooCommon => ("PASSWORD_TOO_COMMON", 400),
    WebhookUrlNotAllowed => ("WEBHOOK_URL_NOT_ALLOWED", 400),
    WebhookEndpointNotFound => ("WEBHOOK_ENDPOINT_NOT_FOUND", 404),
    ApiKeyNotFound => ("API_KEY_NOT_FOUND", 404),
    ServiceUnavailable => ("SERVICE_UNAVAILABLE", 503),
    InvalidPollingCode => ("INVALID_POLLING_CODE", 400),
    InvalidLoginCode => ("INVALID_LOGIN_CODE", 400),
    ApiKeyRevoked => ("API_KEY_REVOKED", 401),
    ApiKeyExpired => ("API_KEY_EXPIRED", 401),
    WrongApiKeyType => ("WRONG_API_KEY_TYPE", 400),
    ApiKeysNotEnabled => ("API_KEYS_NOT_ENABLED", 400),
    AnonymousAuthenticationNotAllowed => ("ANONYMOUS_AUTHENTICATION_NOT_ALLOWED", 401),
    PasskeyAuthenticationNotEnabled => ("PASSKEY_AUTHENTICATION_NOT_ENABLED", 400),
    PasskeyRegistrationFailed => ("PASSKEY_REGISTRATION_FAILED", 400),
    PasskeyAuthenticationFailed => ("PASSKEY_AUTHENTICATION_FAILED", 400),
    PasskeyNotFound => ("PASSKEY_NOT_FOUND", 404),
}

impl ErrorCode {
    pub const fn wire(self) -> &'static str {
        self.meta().0
    }

    pub const fn http_status(self) -> u16 {
        self.meta().1
    }

    /// The gRPC code follows the HTTP status, so direct gRPC callers get a meaningful code too.
    pub const fn grpc_code(self) -> Code {
        match self.http_status() {
            400 => Code::InvalidArgument,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::NotFound,
            405 => Code::Unimplemented,
            408 => Code::DeadlineExceeded,
            409 => Code::AlreadyExists,
            429 => Code::ResourceExhausted,
            503 => Code::Unavailable,
            _ => Code::Internal,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.wire())
    }
}

/// A coded error as the contract describes it: code, human message, optional details.
#[derive(Debug, Clone, PartialEq)]
pub struct CodedError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<Value>,
}

#[derive(Serialize, Deserialize)]
struct WireDetails {
    code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    details: Option<Value>,
}

impl CodedError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn schema(message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(ErrorCode::SchemaError, message.clone())
            .with_details(serde_json::json!({ "message": message }))
    }

    /// An unexpected failure: the cause is logged by the caller, never sent.
    pub fn internal() -> Self {
        Self::new(
            ErrorCode::InternalServerError,
            "An internal error occurred.",
        )
    }

    /// What a failed database call becomes, logged: 503 `SERVICE_UNAVAILABLE` while the
    /// database cannot be reached (`db::is_unavailable`), so callers retry; otherwise 500.
    pub fn from_db(err: &sqlx::Error, store: &str) -> Self {
        if crate::db::is_unavailable(err) {
            tracing::warn!(error = %err, store, "database unavailable");
            Self::new(
                ErrorCode::ServiceUnavailable,
                "The database is unavailable; try again shortly.",
            )
        } else {
            tracing::error!(error = ?err, store, "database call failed");
            Self::internal()
        }
    }

    /// The only way a coded error becomes a gRPC status.
    pub fn into_status(self) -> Status {
        let wire = WireDetails {
            code: self.code.wire().to_owned(),
            details: self.details,
        };
        let bytes = serde_json::to_vec(&wire).unwrap_or_default();
        Status::with_details(self.code.grpc_code(), self.message, bytes.into())
    }

    /// The only way a gRPC status becomes a coded error. Statuses that carry no code (transport
    /// failures, deadlines, a service that is down) map to a generic code by their gRPC code.
    pub fn from_status(status: &Status) -> Self {
        if let Ok(wire) = serde_json::from_slice::<WireDetails>(status.details()) {
            if let Some(code) = ErrorCode::from_wire(&wire.code) {
                return Self {
                    code,
                    message: status.message().to_owned(),
                    details: wire.details,
                };
            }
        }
        match status.code() {
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => {
                // The caller gets a generic 503; the operator needs to know which hop failed.
                tracing::warn!(code = ?status.code(), message = status.message(), "a backing service call failed");
                Self::new(
                    ErrorCode::ServiceUnavailable,
                    "A backing service is unavailable; try again shortly.",
                )
            }
            _ => Self::internal(),
        }
    }
}

impl From<CodedError> for Status {
    fn from(err: CodedError) -> Self {
        err.into_status()
    }
}

impl std::fmt::Display for CodedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CodedError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.wire()), "duplicate {}", code.wire());
            assert_eq!(ErrorCode::from_wire(code.wire()), Some(*code));
        }
        assert!(ErrorCode::ALL.len() >= 90);
    }

    #[test]
    fn coded_error_survives_the_grpc_hop() {
        let err = CodedError::new(ErrorCode::TeamNotFound, "No team.")
            .with_details(serde_json::json!({"team_id": "x"}));
        let status = err.clone().into_status();
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(CodedError::from_status(&status), err);
    }

    #[test]
    fn uncoded_statuses_become_generic_codes() {
        let down = CodedError::from_status(&Status::unavailable("connection refused"));
        assert_eq!(down.code, ErrorCode::ServiceUnavailable);
        let odd = CodedError::from_status(&Status::internal("boom"));
        assert_eq!(odd.code, ErrorCode::InternalServerError);
        assert_eq!(odd.message, "An internal error occurred.");
    }
}
