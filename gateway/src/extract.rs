//! Strict body and query extractors (00 §1): our error envelope for every rejection, unknown
//! fields refused, the accepted content types and nothing else.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// A JSON object body deserialized into `T` (which should deny unknown fields).
pub struct Json<T>(pub T);

/// The body as parsed JSON, for routes that pass a document through (settings).
pub struct JsonValue(pub Value);

/// Deepest nesting of arrays and objects a body may have; nothing in the API needs more.
pub const MAX_JSON_DEPTH: usize = 32;

/// Refuses bodies nested deeper than `MAX_JSON_DEPTH` before parsing them, so a deep document
/// costs one linear scan and no recursion.
fn check_depth(bytes: &[u8]) -> Result<(), ApiError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(ApiError::body_parsing(format!(
                        "The JSON body is nested deeper than {MAX_JSON_DEPTH} levels."
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Value, ApiError> {
    let (content_type, bytes) = read_bytes(request, state).await?;
    parse_body(content_type.as_deref(), &bytes)
}

async fn read_bytes<S: Send + Sync>(
    request: Request,
    state: &S,
) -> Result<(Option<String>, Bytes), ApiError> {
    let content_type = request
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("\u{fffd}").to_ascii_lowercase());
    let bytes = Bytes::from_request(request, state).await.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large()
        } else if timed_out(&e) {
            ApiError::body_timeout()
        } else {
            ApiError::body_parsing("The request body could not be read.")
        }
    })?;
    Ok((content_type, bytes))
}

/// A request body as a JSON object, by its content type (JSON, text read as JSON, or a form):
/// what every handler receives, and what the rate limiter reads a recipient or account from.
pub fn parse_body(content_type: Option<&str>, bytes: &[u8]) -> Result<Value, ApiError> {
    let mime = content_type.map(|c| {
        c.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    let value = match mime.as_deref() {
        _ if bytes.is_empty() => return Err(ApiError::schema("A JSON object body is required.")),
        // A text/plain body is parsed as JSON too (80 §11.19).
        None | Some("application/json") | Some("text/plain") => {
            check_depth(bytes)?;
            serde_json::from_slice::<Value>(bytes)
                .map_err(|e| ApiError::body_parsing(format!("Malformed JSON: {e}")))?
        }
        Some("application/x-www-form-urlencoded") => {
            let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(bytes)
                .map_err(|e| ApiError::body_parsing(format!("Malformed form body: {e}")))?;
            Value::Object(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Some(other) => {
            return Err(ApiError::body_parsing(format!(
                "Unsupported content type: {other}"
            )))
        }
    };
    if !value.is_object() {
        return Err(ApiError::schema("The body must be a JSON object."));
    }
    if holds_nul(&value) {
        return Err(nul_refused());
    }
    Ok(value)
}

/// Whether the body read failed because the client stopped sending (the body timeout).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(err) = cause {
        if err.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cause = err.source();
    }
    false
}

/// Whether any string or key in a document holds U+0000. PostgreSQL cannot store it and
/// SQLite would, so refusing it at the door keeps both backends answering alike; no field of
/// the API has a use for it.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

fn nul_refused() -> ApiError {
    ApiError::schema("Strings may not contain the NUL character (U+0000).")
}

/// A body object as the handler's type; a mismatch is a schema error.
fn typed<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::schema(format!("Invalid body: {e}")))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;
    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        typed(read_body(request, state).await?).map(Json)
    }
}

/// As `Json`, for routes whose body is optional: no body at all reads as `{}`.
pub struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;
    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (content_type, bytes) = read_bytes(request, state).await?;
        let value = if bytes.is_empty() {
            Value::Object(Map::new())
        } else {
            parse_body(content_type.as_deref(), &bytes)?
        };
        typed(value).map(OptionalJson)
    }
}

impl<S: Send + Sync> FromRequest<S> for JsonValue {
    type Rejection = ApiError;
    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        read_body(request, state).await.map(JsonValue)
    }
}

/// Query parameters deserialized into `T` (which should deny unknown fields).
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        // A URI cannot carry a raw NUL, so in a query it can only arrive percent-encoded.
        if query.contains("%00") {
            return Err(nul_refused());
        }
        serde_urlencoded::from_str(query)
            .map(Query)
            .map_err(|e| ApiError::schema(format!("Invalid query: {e}")))
    }
}

/// No query parameters allowed.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoQuery {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nesting_outside_strings_only() {
        let deep = "[".repeat(MAX_JSON_DEPTH + 1);
        assert!(check_depth(deep.as_bytes()).is_err());
        assert!(check_depth("[".repeat(MAX_JSON_DEPTH).as_bytes()).is_ok());
        let quoted = format!("{{\"a\": \"{}\\\"{}\"}}", "[".repeat(100), "{".repeat(100));
        assert!(check_depth(quoted.as_bytes()).is_ok(), "{quoted}");
    }
}
