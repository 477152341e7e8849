//! The OpenAPI 3.1 document, generated from the handlers' annotations.

use axum::Json;
use utoipa::OpenApi;

use crate::routes::{internal, projects, root};

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
        document,
    )
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "root",
    responses((status = 200, description = "This document")))]
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
