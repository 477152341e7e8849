//! The OpenAPI 3.1 document, generated from the handlers' annotations.

use axum::Json;
use utoipa::OpenApi;

use crate::routes::{
    api_keys, auth_anonymous, auth_cli, auth_mfa, auth_otp, auth_passkey, auth_password,
    auth_sessions, contact_channels, internal, oauth, oauth_providers, permissions, projects, root,
    team_invitations, team_member_profiles, teams, users, webhook_endpoints,
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
        internal::send_test_email,
        internal::rotate_signing_keys,
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
        auth_anonymous::sign_up,
        auth_passkey::initiate_registration,
        auth_passkey::register,
        auth_passkey::initiate_authentication,
        auth_passkey::sign_in,
        auth_passkey::list,
        auth_passkey::delete,
        auth_cli::start,
        api_keys::list_user,
        api_keys::create_user,
        api_keys::get_user,
        api_keys::update_user,
        api_keys::check_user,
        api_keys::list_team,
        api_keys::create_team,
        api_keys::get_team,
        api_keys::update_team,
        api_keys::check_team,
        auth_cli::poll,
        auth_cli::complete,
        oauth::authorize,
        oauth::callback_get,
        oauth::callback_post,
        oauth::token,
        oauth_providers::list,
        oauth_providers::create,
        oauth_providers::get,
        oauth_providers::update,
        oauth_providers::delete,
        oauth_providers::connected,
        oauth_providers::access_token,
        webhook_endpoints::list,
        webhook_endpoints::create,
        webhook_endpoints::update,
        webhook_endpoints::delete,
        webhook_endpoints::rotate,
        webhook_endpoints::test,
        webhook_endpoints::deliveries,
        webhook_endpoints::replay,
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
    Json(spec())
}

/// The served document: the handlers' paths, each operation also answering with the error
/// envelope (00 §4) as its `default` response, since any operation can fail with the generic
/// codes (400, 401, 403, 404, 413, 429, 503) besides its own.
pub fn spec() -> utoipa::openapi::OpenApi {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};

    let mut doc = ApiDoc::openapi();
    let text = || ObjectBuilder::new().schema_type(Type::String);
    let envelope = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("code", text().pattern(Some("^[A-Z][A-Z0-9_]*$")))
        .property("error", text())
        .property("details", ObjectBuilder::new().schema_type(Type::Object))
        .required("code")
        .required("error")
        .description(Some(
            "The error envelope (00 §4); `code` also comes in the `X-Service-Known-Error` header",
        ))
        .build();
    doc.components
        .get_or_insert_with(Default::default)
        .schemas
        .insert("ErrorEnvelope".into(), envelope.into());
    let error = ResponseBuilder::new()
        .description("An error in the envelope of 00 §4")
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorEnvelope")))
                .build(),
        )
        .build();
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            operation
                .responses
                .responses
                .entry("default".into())
                .or_insert_with(|| error.clone().into());
        }
    }
    doc
}
