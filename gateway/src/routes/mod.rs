//! The REST routes under `/api/v1`, one module per spec area, plus the operational routes.

pub mod api_keys;
pub mod auth_anonymous;
pub mod auth_cli;
pub mod auth_mfa;
pub mod auth_otp;
pub mod auth_passkey;
pub mod auth_password;
pub mod auth_sessions;
pub mod contact_channels;
pub mod health;
pub mod internal;
pub mod oauth;
pub mod oauth_providers;
pub mod permissions;
pub mod projects;
pub mod root;
pub mod team_invitations;
pub mod team_member_profiles;
pub mod teams;
pub mod users;
pub mod webhook_endpoints;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, patch, post};
use axum::Router;

use crate::access;
use crate::state::AppState;

/// A JSON document a service composed, answered as it is instead of being parsed and written
/// again on the way through.
/// Documents a service answered as JSON text, parsed; unreadable ones are left out.
pub fn parsed(items: &[String]) -> Vec<serde_json::Value> {
    items
        .iter()
        .filter_map(|j| serde_json::from_str(j).ok())
        .collect()
}

pub struct JsonText(pub String);

impl axum::response::IntoResponse for JsonText {
    fn into_response(self) -> axum::response::Response {
        (
            [(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            )],
            self.0,
        )
            .into_response()
    }
}

/// Everything under `/api/v1`. Access headers are validated for matched routes only, so an
/// unknown path is 404 whatever the headers (80 §11.10).
pub fn api(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/api/v1", get(root::root))
        .route("/api/v1/", get(root::root))
        .route("/api/v1/openapi.json", get(crate::openapi::document))
        .route("/api/v1/projects/current", get(projects::current))
        .route(
            "/api/v1/projects/{project_id}/.well-known/jwks.json",
            get(projects::jwks),
        )
        .route(
            "/api/v1/internal/project",
            get(internal::get_project).patch(internal::update_project),
        )
        .route(
            "/api/v1/internal/api-keys",
            get(internal::list_api_keys).post(internal::create_api_key),
        )
        .route(
            "/api/v1/internal/api-keys/{api_key_id}",
            patch(internal::update_api_key),
        )
        .route("/api/v1/internal/emails", get(internal::list_emails))
        .route(
            "/api/v1/internal/send-test-email",
            post(internal::send_test_email),
        )
        .route(
            "/api/v1/internal/signing-keys/rotate",
            post(internal::rotate_signing_keys),
        )
        .merge(webhook_routes())
        .merge(auth_routes())
        .merge(user_routes())
        .merge(contact_channel_routes())
        .merge(team_routes())
        .merge(invitation_routes())
        .route_layer(from_fn_with_state(state.clone(), crate::limits::enforce))
        .route_layer(from_fn_with_state(state, access::validate))
}

fn auth_routes() -> Router<AppState> {
    use axum::routing::delete;
    Router::new()
        .route(
            "/api/v1/auth/password/sign-up",
            post(auth_password::sign_up),
        )
        .route(
            "/api/v1/auth/password/sign-in",
            post(auth_password::sign_in),
        )
        .route("/api/v1/auth/password/update", post(auth_password::update))
        .route("/api/v1/auth/password/set", post(auth_password::set))
        .route(
            "/api/v1/auth/password/send-reset-code",
            post(auth_password::send_reset_code),
        )
        .route("/api/v1/auth/password/reset", post(auth_password::reset))
        .route(
            "/api/v1/auth/password/reset/check-code",
            post(auth_password::check_reset_code),
        )
        .route(
            "/api/v1/auth/sessions",
            get(auth_sessions::list).post(auth_sessions::create),
        )
        .route(
            "/api/v1/auth/sessions/current",
            delete(auth_sessions::sign_out),
        )
        .route(
            "/api/v1/auth/sessions/current/refresh",
            post(auth_sessions::refresh),
        )
        .route("/api/v1/auth/sessions/{id}", delete(auth_sessions::delete))
        .route(
            "/api/v1/auth/otp/send-sign-in-code",
            post(auth_otp::send_code),
        )
        .route("/api/v1/auth/otp/sign-in", post(auth_otp::sign_in))
        .route("/api/v1/auth/otp/sign-in/check-code", post(auth_otp::check))
        .route("/api/v1/auth/mfa/sign-in", post(auth_mfa::sign_in))
        .route(
            "/api/v1/user-api-keys",
            get(api_keys::list_user).post(api_keys::create_user),
        )
        .route("/api/v1/user-api-keys/check", post(api_keys::check_user))
        .route(
            "/api/v1/user-api-keys/{api_key_id}",
            get(api_keys::get_user).patch(api_keys::update_user),
        )
        .route(
            "/api/v1/team-api-keys",
            get(api_keys::list_team).post(api_keys::create_team),
        )
        .route("/api/v1/team-api-keys/check", post(api_keys::check_team))
        .route(
            "/api/v1/team-api-keys/{api_key_id}",
            get(api_keys::get_team).patch(api_keys::update_team),
        )
        .route(
            "/api/v1/auth/anonymous/sign-up",
            post(auth_anonymous::sign_up),
        )
        .route(
            "/api/v1/auth/passkey/initiate-passkey-registration",
            post(auth_passkey::initiate_registration),
        )
        .route(
            "/api/v1/auth/passkey/register",
            post(auth_passkey::register),
        )
        .route(
            "/api/v1/auth/passkey/initiate-passkey-authentication",
            post(auth_passkey::initiate_authentication),
        )
        .route("/api/v1/auth/passkey/sign-in", post(auth_passkey::sign_in))
        .route("/api/v1/users/{user_id}/passkeys", get(auth_passkey::list))
        .route(
            "/api/v1/users/{user_id}/passkeys/{passkey_id}",
            delete(auth_passkey::delete),
        )
        .route("/api/v1/auth/cli", post(auth_cli::start))
        .route("/api/v1/auth/cli/poll", post(auth_cli::poll))
        .route("/api/v1/auth/cli/complete", post(auth_cli::complete))
        .route(
            "/api/v1/auth/oauth/authorize/{provider_id}",
            get(oauth::authorize),
        )
        .route(
            "/api/v1/auth/oauth/callback/{provider_id}",
            get(oauth::callback_get).post(oauth::callback_post),
        )
        .route("/api/v1/auth/oauth/token", post(oauth::token))
        .route(
            "/api/v1/oauth-providers",
            get(oauth_providers::list).post(oauth_providers::create),
        )
        .route(
            "/api/v1/oauth-providers/{user_id}/{provider_id}",
            get(oauth_providers::get)
                .patch(oauth_providers::update)
                .delete(oauth_providers::delete),
        )
        .route(
            "/api/v1/connected-accounts/{user_id}",
            get(oauth_providers::connected),
        )
        .route(
            "/api/v1/connected-accounts/{user_id}/{provider_id}/access-token",
            post(oauth_providers::access_token),
        )
}

fn user_routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/users/me",
            get(users::get_me)
                .patch(users::update_me)
                .delete(users::delete_me),
        )
        .route("/api/v1/users", get(users::list).post(users::create))
        .route(
            "/api/v1/users/{user_id}",
            get(users::get).patch(users::update).delete(users::delete),
        )
}

fn team_routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/teams", get(teams::list).post(teams::create))
        .route(
            "/api/v1/teams/{team_id}",
            get(teams::get).patch(teams::update).delete(teams::delete),
        )
        .route(
            "/api/v1/team-memberships/{team_id}/{user_id}",
            post(teams::add_member).delete(teams::remove_member),
        )
        .route("/api/v1/team-permissions", get(teams::list_permissions))
        .route("/api/v1/project-permissions", get(permissions::list))
        .route(
            "/api/v1/project-permissions/{user_id}/{permission_id}",
            post(permissions::grant).delete(permissions::revoke),
        )
        .merge(definition_routes("/api/v1/team-permission-definitions"))
        .merge(definition_routes("/api/v1/project-permission-definitions"))
        .route(
            "/api/v1/team-member-profiles",
            get(team_member_profiles::list),
        )
        .route(
            "/api/v1/team-member-profiles/{team_id}/{user_id}",
            get(team_member_profiles::get).patch(team_member_profiles::update),
        )
        .route(
            "/api/v1/team-permissions/{team_id}/{user_id}/{permission_id}",
            post(teams::grant).delete(teams::revoke),
        )
}

/// The same four definition routes for each scope (50 §4); the handlers read the scope from
/// the path.
fn definition_routes(base: &str) -> Router<AppState> {
    use permissions as p;
    Router::new()
        .route(base, get(p::list_definitions).post(p::create_definition))
        .route(
            &format!("{base}/{{permission_id}}"),
            patch(p::update_definition).delete(p::delete_definition),
        )
}

fn invitation_routes() -> Router<AppState> {
    use team_invitations as ti;
    Router::new()
        .route("/api/v1/team-invitations", get(ti::list))
        .route("/api/v1/team-invitations/send-code", post(ti::send))
        .route("/api/v1/team-invitations/accept", post(ti::accept))
        .route("/api/v1/team-invitations/accept/details", post(ti::details))
        .route(
            "/api/v1/team-invitations/accept/check-code",
            post(ti::check),
        )
        .route(
            "/api/v1/team-invitations/{id}",
            axum::routing::delete(ti::revoke),
        )
        .route(
            "/api/v1/team-invitations/{id}/accept",
            post(ti::accept_by_id),
        )
}

fn contact_channel_routes() -> Router<AppState> {
    use contact_channels as cc;
    Router::new()
        .route("/api/v1/contact-channels", get(cc::list).post(cc::create))
        .route(
            "/api/v1/contact-channels/send-verification-code",
            post(cc::send_code_legacy),
        )
        .route("/api/v1/contact-channels/verify", post(cc::verify))
        .route(
            "/api/v1/contact-channels/verify/check-code",
            post(cc::check_verification_code),
        )
        .route(
            "/api/v1/contact-channels/{user_id}/{contact_channel_id}",
            get(cc::get).patch(cc::update).delete(cc::delete),
        )
        .route(
            "/api/v1/contact-channels/{user_id}/{contact_channel_id}/send-verification-code",
            post(cc::send_code),
        )
}

/// Health and metrics, outside `/api/v1` and without headers (80 §11.6).
pub fn operations() -> Router<AppState> {
    Router::new()
        .route("/health/live", get(health::live))
        .route("/health/ready", get(health::ready))
        .route("/metrics", get(health::metrics))
}

fn webhook_routes() -> Router<AppState> {
    use webhook_endpoints as we;
    Router::new()
        .route("/api/v1/webhook-endpoints", get(we::list).post(we::create))
        .route(
            "/api/v1/webhook-endpoints/{id}",
            patch(we::update).delete(we::delete),
        )
        .route(
            "/api/v1/webhook-endpoints/{id}/rotate-secret",
            post(we::rotate),
        )
        .route("/api/v1/webhook-endpoints/{id}/test", post(we::test))
        .route(
            "/api/v1/webhook-endpoints/{id}/deliveries",
            get(we::deliveries),
        )
        .route(
            "/api/v1/webhook-endpoints/{id}/deliveries/{message_id}/replay",
            post(we::replay),
        )
}
