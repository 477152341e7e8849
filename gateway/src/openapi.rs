//! The OpenAPI 3.1 document, generated from the handlers' annotations.

use axum::Json;
use utoipa::OpenApi;

use crate::routes::{
    auth_mfa, auth_otp, auth_password, auth_sessions, contact_channels, internal, permissions,
    projects, root, team_invitations, team_member_profiles, teams, users,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Latchkey API",
        version = "1",
        description = "Authentication and team membership. Send `X-Service-Access-Type`, `X-Service-Project-Id` and the key of the access type (`X-Stack-*` and `X-Hexclave-*` work too)."
    ),
    paths(
        root::root,
        projects::current,
        projects::jwks,
        internal::get_project,
        internal::update_project,
        internal::list_api_keys,
        internal::create_api_key,
        internal::update_api_key,
        internal::list_emails,
        auth_password::sign_up,
        auth_password::sign_in,
        auth_password::update,
        auth_password::set,
        auth_password::send_reset_code,
        auth_password::reset,
        auth_password::check_reset_code,
        auth_otp::send_code,
        auth_otp::sign_in,
        auth_otp::check,
        auth_mfa::sign_in,
        auth_sessions::list,
        auth_sessions::create,
        auth_sessions::delete,
        auth_sessions::sign_out,
        auth_sessions::refresh,
        users::get_me,
        users::update_me,
        users::delete_me,
        users::list,
        users::create,
        users::get,
        users::update,
        users::delete,
        contact_channels::list,
        contact_channels::create,
        contact_channels::get,
        contact_channels::update,
        contact_channels::delete,
        contact_channels::send_code,
        contact_channels::send_code_legacy,
        contact_channels::verify,
        contact_channels::check_verification_code,
        teams::list,
        teams::create,
        teams::get,
        teams::update,
        teams::delete,
        teams::add_member,
        teams::remove_member,
        teams::list_permissions,
        teams::grant,
        teams::revoke,
        team_member_profiles::list,
        team_member_profiles::get,
        team_member_profiles::update,
        team_invitations::send,
        team_invitations::list,
        team_invitations::revoke,
        team_invitations::accept,
        team_invitations::details,
        team_invitations::check,
        team_invitations::accept_by_id,
        permissions::list,
        permissions::grant,
        permissions::revoke,
        permissions::list_definitions,
        permissions::create_definition,
        permissions::update_definition,
        permissions::delete_definition,
        permissions::project_scope::list,
        permissions::project_scope::create,
        permissions::project_scope::update,
        permissions::project_scope::delete,
        document,
    )
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "root",
    responses((status = 200, description = "This document")))]
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
