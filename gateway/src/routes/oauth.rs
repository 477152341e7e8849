//! OAuth sign-in (10 §4): authorize and callback are browser navigations without access
//! headers; the token endpoint takes the app's credentials in its body or Basic auth.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::json;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::request_id::RequestId;
use crate::state::AppState;

/// Stack's SDKs send this when a project has no publishable key; ours always have one.
const PUBLIC_CLIENT_SENTINEL: &str = "__stack_public_client__";
const COOKIE_PREFIX: &str = "service-oauth-inner-";
const FLOW_SECONDS: u32 = 600;
/// Access tokens live ten minutes (70 §1).
const ACCESS_TOKEN_SECONDS: u32 = 600;

fn context(project_id: Uuid, user_id: Option<Uuid>, request_id: Option<&RequestId>) -> Context {
    Context {
        project_id,
        access_type: AccessType::Client,
        user_id,
        request_id: request_id.map(|r| r.0.clone()),
    }
}

fn invalid_client() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidOauthClientIdOrSecret,
        "The client id or secret is not valid.",
    )
}

fn project_of(client_id: &str, client_secret: &str) -> Result<Uuid, ApiError> {
    if client_secret == PUBLIC_CLIENT_SENTINEL {
        return Err(ApiError::new(
            ErrorCode::PublishableClientKeyRequiredForProject,
            "This project requires its publishable client key.",
        ));
    }
    Uuid::parse_str(client_id).map_err(|_| invalid_client())
}

struct Params(HashMap<String, String>);

impl Params {
    fn required(&self, key: &str) -> Result<String, ApiError> {
        self.0
            .get(key)
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| ApiError::schema(format!("{key} is required")))
    }

    fn optional(&self, key: &str) -> Option<String> {
        self.0.get(key).filter(|v| !v.is_empty()).cloned()
    }

    fn one_of(&self, key: &str, allowed: &[&str], default: &str) -> Result<String, ApiError> {
        let value = self.optional(key).unwrap_or_else(|| default.to_owned());
        if allowed.contains(&value.as_str()) {
            Ok(value)
        } else {
            Err(ApiError::schema(format!(
                "{key} must be one of {}",
                allowed.join(", ")
            )))
        }
    }
}

#[utoipa::path(get, path = "/api/v1/auth/oauth/authorize/{provider_id}", tag = "oauth",
    params(("provider_id" = String, Path, description = "configured provider id")),
    description = "Browser navigation, no access headers. Query: client_id (project id), client_secret (publishable key), redirect_uri, scope=legacy, state, grant_type=authorization_code, code_challenge, code_challenge_method (S256|plain), response_type=code, type (authenticate|link), token (for link), provider_scope, error_redirect_uri, after_callback_redirect_url, stack_response_mode (redirect|json).",
    responses((status = 307, description = "to the provider, with the inner-state cookie"), (status = 200, description = "json mode: location")))]
pub async fn authorize(
    State(app): State<AppState>,
    Path(provider_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    request_id: Option<Extension<RequestId>>,
) -> ApiResult<Response> {
    let q = Params(query);
    let client_id = q.required("client_id")?;
    let client_secret = q.required("client_secret")?;
    let project_id = project_of(&client_id, &client_secret)?;
    let redirect_uri = q.required("redirect_uri")?;
    let state = q.required("state")?;
    let code_challenge = q.required("code_challenge")?;
    if q.required("scope")? != "legacy" {
        return Err(ApiError::new(
            ErrorCode::InvalidScope,
            "scope must be legacy",
        ));
    }
    q.one_of("grant_type", &["authorization_code"], "")?;
    q.one_of("response_type", &["code"], "")?;
    let code_challenge_method = q.one_of("code_challenge_method", &["S256", "plain"], "")?;
    let link = q.one_of("type", &["authenticate", "link"], "authenticate")? == "link";
    let json_mode = q.one_of("stack_response_mode", &["redirect", "json"], "redirect")? == "json";
    let user_id = match q.optional("token") {
        Some(token) => Some(app.tokens.verify(&token, project_id).await?.user_id),
        None if link => {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "type=link needs the user's access token in `token`",
            ))
        }
        None => None,
    };
    let request = pb::AuthorizeRequest {
        provider_id,
        client_secret,
        redirect_uri,
        state,
        code_challenge,
        code_challenge_method,
        link,
        user_id: user_id.map(|u| u.to_string()),
        provider_scope: q.optional("provider_scope"),
        error_redirect_uri: q
            .optional("error_redirect_uri")
            .or_else(|| q.optional("error_redirect_url")),
        after_callback_redirect_url: q.optional("after_callback_redirect_url"),
        redirect_mode: !json_mode,
    };
    let ctx = context(project_id, user_id, request_id.as_ref().map(|e| &e.0));
    let done = app
        .oauth
        .clone()
        .authorize(ctx.request(request))
        .await?
        .into_inner();
    let secure = if app.config.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{COOKIE_PREFIX}{}=true; Path=/; Max-Age={FLOW_SECONDS}; HttpOnly; SameSite=Lax{secure}",
        done.inner_state
    );
    if json_mode {
        let mut response = Json(json!({ "location": done.location })).into_response();
        // Link flows need the cookie in JSON mode too (the callback requires it for them).
        if link {
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, v);
            }
        }
        return Ok(response);
    }
    redirect(
        StatusCode::TEMPORARY_REDIRECT,
        &done.location,
        Some(&cookie),
    )
}

fn redirect(status: StatusCode, location: &str, cookie: Option<&str>) -> ApiResult<Response> {
    let mut response = status.into_response();
    let value = |v: &str| {
        HeaderValue::from_str(v)
            .map_err(|_| ApiError::schema("the redirect target is not a valid header value"))
    };
    response
        .headers_mut()
        .insert(header::LOCATION, value(location)?);
    if let Some(cookie) = cookie {
        response
            .headers_mut()
            .insert(header::SET_COOKIE, value(cookie)?);
    }
    Ok(response)
}

fn has_cookie(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|pair| pair.trim().split('=').next() == Some(name))
}

/// The project a callback belongs to is the prefix of the inner state we issued.
fn split_state(state: &str) -> Result<(Uuid, String), ApiError> {
    let invalid = || {
        ApiError::new(
            ErrorCode::InvalidOauthState,
            "The OAuth state is not valid.",
        )
    };
    let (project, code) = state.split_at_checked(32).ok_or_else(invalid)?;
    let project = Uuid::try_parse(project).map_err(|_| invalid())?;
    if code.len() != latchkey_shared::codes::CODE_LEN {
        return Err(invalid());
    }
    Ok((project, code.to_owned()))
}

async fn callback(
    app: AppState,
    provider_id: String,
    params: HashMap<String, String>,
    headers: &HeaderMap,
    request_id: Option<&RequestId>,
) -> ApiResult<Response> {
    let q = Params(params);
    let state = q.optional("state").unwrap_or_default();
    let (project_id, state_code) = split_state(&state)?;
    let cookie = format!("{COOKIE_PREFIX}{state}");
    let request = pb::CallbackRequest {
        provider_id,
        state_code,
        code: q.optional("code"),
        error: q.optional("error"),
        cookie_present: has_cookie(headers, &cookie),
    };
    let ctx = context(project_id, None, request_id);
    let done = app
        .oauth
        .clone()
        .callback(ctx.request(request))
        .await?
        .into_inner();
    let clear = format!("{cookie}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax");
    redirect(StatusCode::SEE_OTHER, &done.location, Some(&clear))
}

#[utoipa::path(get, path = "/api/v1/auth/oauth/callback/{provider_id}", tag = "oauth",
    params(("provider_id" = String, Path, description = "configured provider id")),
    description = "Called by the provider (query: state, code or error).",
    responses((status = 303, description = "to the app's redirect_uri with code and state, or with error parameters")))]
pub async fn callback_get(
    State(app): State<AppState>,
    Path(provider_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    request_id: Option<Extension<RequestId>>,
) -> ApiResult<Response> {
    callback(
        app,
        provider_id,
        query,
        &headers,
        request_id.as_ref().map(|e| &e.0),
    )
    .await
}

#[utoipa::path(post, path = "/api/v1/auth/oauth/callback/{provider_id}", tag = "oauth",
    params(("provider_id" = String, Path, description = "configured provider id")),
    description = "Form-post variant of the callback (providers using response_mode=form_post).",
    responses((status = 303, description = "as the GET variant")))]
pub async fn callback_post(
    State(app): State<AppState>,
    Path(provider_id): Path<String>,
    headers: HeaderMap,
    request_id: Option<Extension<RequestId>>,
    body: Bytes,
) -> ApiResult<Response> {
    let form: HashMap<String, String> = serde_urlencoded::from_bytes(&body)
        .map_err(|e| ApiError::body_parsing(format!("the callback form is malformed: {e}")))?;
    callback(
        app,
        provider_id,
        form,
        &headers,
        request_id.as_ref().map(|e| &e.0),
    )
    .await
}

/// The token request's fields, from a form or JSON body.
fn token_params(headers: &HeaderMap, body: &Bytes) -> Result<Params, ApiError> {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let mut fields: HashMap<String, String> = if form {
        serde_urlencoded::from_bytes(body)
            .map_err(|e| ApiError::body_parsing(format!("the form is malformed: {e}")))?
    } else {
        let value: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::body_parsing(format!("the body is not JSON: {e}")))?;
        let object = value
            .as_object()
            .ok_or_else(|| ApiError::schema("the body must be an object"))?;
        object
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
            .collect()
    };
    // HTTP Basic carries the client credentials for confidential-client style callers.
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()
        })
        .and_then(|b| String::from_utf8(b).ok());
    if let Some((id, secret)) = basic.as_deref().and_then(|b| b.split_once(':')) {
        fields
            .entry("client_id".into())
            .or_insert_with(|| id.to_owned());
        fields
            .entry("client_secret".into())
            .or_insert_with(|| secret.to_owned());
    }
    Ok(Params(fields))
}

#[utoipa::path(post, path = "/api/v1/auth/oauth/token", tag = "oauth",
    request_body(content = Object, description = "grant_type (authorization_code|refresh_token), client_id, client_secret (or HTTP Basic), code, redirect_uri, code_verifier, refresh_token; JSON or form"),
    responses((status = 200, description = "access_token, refresh_token, token_type, expires_in, scope, is_new_user, after_callback_redirect_url"),
        (status = 400, description = "INVALID_AUTHORIZATION_CODE, REDIRECT_URI_MISMATCH, OAUTH_INVALID_REQUEST, MULTI_FACTOR_AUTHENTICATION_REQUIRED")))]
pub async fn token(
    State(app): State<AppState>,
    headers: HeaderMap,
    request_id: Option<Extension<RequestId>>,
    body: Bytes,
) -> ApiResult<Response> {
    let p = token_params(&headers, &body)?;
    let client_id = p.optional("client_id").ok_or_else(invalid_client)?;
    let client_secret = p.optional("client_secret").ok_or_else(invalid_client)?;
    let project_id = project_of(&client_id, &client_secret)?;
    let grant_type = p
        .optional("grant_type")
        .ok_or_else(|| ApiError::new(ErrorCode::OauthInvalidRequest, "grant_type is required"))?;
    let request = pb::TokenRequest {
        grant_type,
        client_secret,
        code: p.optional("code"),
        redirect_uri: p.optional("redirect_uri"),
        code_verifier: p.optional("code_verifier"),
        refresh_token: p.optional("refresh_token"),
    };
    let ctx = context(project_id, None, request_id.as_ref().map(|e| &e.0));
    let issued = app
        .oauth
        .clone()
        .token(ctx.request(request))
        .await?
        .into_inner();
    let mut body = json!({
        "access_token": issued.access_token,
        "refresh_token": issued.refresh_token,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_SECONDS,
        "scope": "legacy",
        "after_callback_redirect_url": issued.after_callback_redirect_url,
        "afterCallbackRedirectUrl": issued.after_callback_redirect_url,
    });
    if let Some(new) = issued.is_new_user {
        body["is_new_user"] = json!(new);
        body["newUser"] = json!(new);
    }
    let mut response = Json(body).into_response();
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    Ok(response)
}
