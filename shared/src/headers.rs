//! Request and response header names. Every `X-Service-*` request header may also arrive as
//! `X-Stack-*` or `X-Hexclave-*` (80 §11.7); when several forms are sent, `X-Service-*` wins,
//! then `X-Stack-*`.

use http::HeaderMap;

/// Prefixes in order of precedence.
pub const PREFIXES: [&str; 3] = ["x-service-", "x-stack-", "x-hexclave-"];

pub const ACCESS_TYPE: &str = "access-type";
pub const PROJECT_ID: &str = "project-id";
pub const PUBLISHABLE_CLIENT_KEY: &str = "publishable-client-key";
pub const SECRET_SERVER_KEY: &str = "secret-server-key";
pub const SUPER_SECRET_ADMIN_KEY: &str = "super-secret-admin-key";
pub const ACCESS_TOKEN: &str = "access-token";
pub const REFRESH_TOKEN: &str = "refresh-token";
pub const ALLOW_RESTRICTED_USER: &str = "allow-restricted-user";
pub const ALLOW_ANONYMOUS_USER: &str = "allow-anonymous-user";
pub const OVERRIDE_ERROR_STATUS: &str = "override-error-status";
pub const CLIENT_VERSION: &str = "client-version";
pub const RANDOM_NONCE: &str = "random-nonce";
pub const BRANCH_ID: &str = "branch-id";

/// Request headers a browser may send (CORS allow list), without prefix.
pub const REQUEST_HEADERS: [&str; 13] = [
    ACCESS_TYPE,
    PROJECT_ID,
    PUBLISHABLE_CLIENT_KEY,
    SECRET_SERVER_KEY,
    SUPER_SECRET_ADMIN_KEY,
    ACCESS_TOKEN,
    REFRESH_TOKEN,
    ALLOW_RESTRICTED_USER,
    ALLOW_ANONYMOUS_USER,
    OVERRIDE_ERROR_STATUS,
    CLIENT_VERSION,
    RANDOM_NONCE,
    BRANCH_ID,
];

/// Response headers, without prefix.
pub const KNOWN_ERROR: &str = "known-error";
pub const ACTUAL_STATUS: &str = "actual-status";
pub const REQUEST_ID: &str = "request-id";

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Present but not visible ASCII.
    NotText(String),
}

/// The value of a prefixed header under the first prefix that carries it. An empty value
/// counts as absent, as Stack Auth's SDKs send empty strings for unset keys.
pub fn read<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, HeaderError> {
    for prefix in PREFIXES {
        // Compared in place rather than looked up by a formatted name: every request reads
        // several of these, under three prefixes each.
        let value = headers.iter().find_map(|(key, value)| {
            let key = key.as_str();
            let named = key.len() == prefix.len() + name.len()
                && key.starts_with(prefix)
                && key[prefix.len()..].eq_ignore_ascii_case(name);
            named.then_some(value)
        });
        if let Some(value) = value {
            let text = value
                .to_str()
                .map_err(|_| HeaderError::NotText(format!("{prefix}{name}")))?
                .trim();
            if !text.is_empty() {
                return Ok(Some(text));
            }
        }
    }
    Ok(None)
}

/// Whether any prefix carries the header, whatever its value.
pub fn present(headers: &HeaderMap, name: &str) -> bool {
    matches!(read(headers, name), Ok(Some(_)) | Err(_))
}

/// Every prefixed form of a name, e.g. for CORS lists and response headers.
pub fn all_forms(name: &str) -> impl Iterator<Item = String> + '_ {
    PREFIXES.iter().map(move |p| format!("{p}{name}"))
}

/// The three access types of 00 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessType {
    Client,
    Server,
    Admin,
}

impl AccessType {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
            Self::Admin => "admin",
        }
    }

    /// The header that carries this access type's key.
    pub const fn key_header(self) -> &'static str {
        match self {
            Self::Client => PUBLISHABLE_CLIENT_KEY,
            Self::Server => SECRET_SERVER_KEY,
            Self::Admin => SUPER_SECRET_ADMIN_KEY,
        }
    }
}

impl std::str::FromStr for AccessType {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "client" => Ok(Self::Client),
            "server" => Ok(Self::Server),
            "admin" => Ok(Self::Admin),
            _ => Err(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn service_prefix_wins_then_stack() {
        let mut h = HeaderMap::new();
        h.insert("x-hexclave-project-id", HeaderValue::from_static("c"));
        assert_eq!(read(&h, PROJECT_ID), Ok(Some("c")));
        h.insert("x-stack-project-id", HeaderValue::from_static("b"));
        assert_eq!(read(&h, PROJECT_ID), Ok(Some("b")));
        h.insert("x-service-project-id", HeaderValue::from_static("a"));
        assert_eq!(read(&h, PROJECT_ID), Ok(Some("a")));
    }

    #[test]
    fn empty_is_absent_and_binary_is_an_error() {
        let mut h = HeaderMap::new();
        h.insert("x-service-access-type", HeaderValue::from_static(""));
        assert_eq!(read(&h, ACCESS_TYPE), Ok(None));
        h.insert(
            "x-stack-access-token",
            HeaderValue::from_bytes(&[0xff, 0xfe]).unwrap_or(HeaderValue::from_static("x")),
        );
        assert!(read(&h, ACCESS_TOKEN).is_err());
    }
}
