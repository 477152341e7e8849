//! The writable user fields (20 §1.1) as one typed change, parsed from a request body with the
//! field set of the caller: client update (CU), server create (SC) or server update (SU).

use latchkey_shared::email;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    ClientUpdate,
    ServerCreate,
    ServerUpdate,
}

/// `None`: not in the body. `Some(None)`: explicitly null.
type Change<T> = Option<Option<T>>;

#[derive(Debug, Clone, Default)]
pub struct UserWrite {
    pub primary_email: Change<String>,
    pub primary_email_verified: Option<bool>,
    pub primary_email_auth_enabled: Option<bool>,
    pub display_name: Change<String>,
    pub profile_image_url: Change<String>,
    pub otp_auth_enabled: Option<bool>,
    pub password: Change<String>,
    pub password_hash: Option<String>,
    pub client_metadata: Option<Value>,
    pub client_read_only_metadata: Option<Value>,
    pub server_metadata: Option<Value>,
    pub selected_team_id: Change<uuid::Uuid>,
    pub restricted_by_admin: Option<bool>,
    pub restricted_by_admin_reason: Change<String>,
    pub restricted_by_admin_private_details: Change<String>,
    pub country_code: Change<String>,
    pub risk_scores: Option<(i32, i32)>,
    /// Base64 of the raw TOTP secret, canonicalised.
    pub totp_secret: Change<String>,
    /// Provider accounts to link at creation (20 §1.1, `oauth_providers`).
    pub oauth_providers: Vec<LinkedAccount>,
    /// `passkey_auth_enabled: false`: the user's passkeys are deleted (Stack Auth's way).
    pub remove_passkeys: bool,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkedAccount {
    pub id: String,
    pub account_id: String,
    #[serde(default)]
    pub email: Option<String>,
}

const CLIENT_UPDATE: &[&str] = &[
    "primary_email",
    "display_name",
    "profile_image_url",
    "otp_auth_enabled",
    "totp_secret_base64",
    "client_metadata",
    "selected_team_id",
    "passkey_auth_enabled",
];
const SERVER_ONLY: &[&str] = &[
    "primary_email_verified",
    "primary_email_auth_enabled",
    "password",
    "password_hash",
    "client_read_only_metadata",
    "server_metadata",
    "restricted_by_admin",
    "restricted_by_admin_reason",
    "restricted_by_admin_private_details",
    "is_anonymous",
    "country_code",
    "risk_scores",
];

fn allowed(mode: Mode, key: &str) -> bool {
    match mode {
        Mode::ClientUpdate => CLIENT_UPDATE.contains(&key),
        Mode::ServerCreate => {
            (CLIENT_UPDATE.contains(&key) && key != "selected_team_id")
                || SERVER_ONLY.contains(&key)
                || key == "oauth_providers"
        }
        Mode::ServerUpdate => CLIENT_UPDATE.contains(&key) || SERVER_ONLY.contains(&key),
    }
}

/// A TOTP secret as sent (10 §3.1): base64 of 10 to 64 raw bytes (Stack's SDK sends 20), or
/// null to switch TOTP off.
fn totp_secret(v: &Value) -> Result<Option<String>> {
    use base64::Engine;
    let Some(text) = string_or_null("totp_secret_base64", v)? else {
        return Ok(None);
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine
        .decode(text.trim())
        .map_err(|_| schema("totp_secret_base64 must be base64"))?;
    if !(10..=64).contains(&bytes.len()) {
        return Err(schema("totp_secret_base64 must hold 10 to 64 bytes"));
    }
    Ok(Some(engine.encode(bytes)))
}

fn schema(msg: impl Into<String>) -> Error {
    Error::Invalid(msg.into())
}

fn bool_of(key: &str, v: &Value) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| schema(format!("{key} must be a boolean")))
}

fn string_or_null(key: &str, v: &Value) -> Result<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(schema(format!("{key} must be a string or null"))),
    }
}

/// Password length as Stack's JavaScript runtime counts it (UTF-16 code units).
pub fn password_len(p: &str) -> usize {
    p.encode_utf16().count()
}

fn profile_image(v: Option<String>, mode: Mode) -> Result<Option<String>> {
    let Some(v) = v else { return Ok(None) };
    match latchkey_shared::images::check(&v, mode == Mode::ClientUpdate) {
        Ok(()) => Ok(Some(v)),
        Err(latchkey_shared::images::ImageError::Size) => Err(schema(
            "profile_image_url must be non-empty and at most 1,000,000 characters",
        )),
        Err(latchkey_shared::images::ImageError::Invalid) => Err(Error::InvalidProfileImageUrl),
    }
}

impl UserWrite {
    pub fn parse(body: &Value, mode: Mode) -> Result<Self> {
        let Value::Object(map) = body else {
            return Err(schema("the body must be a JSON object"));
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !allowed(mode, k))
            .collect();
        if !unknown.is_empty() {
            return Err(schema(format!(
                "body contains unknown properties: {}",
                unknown.join(", ")
            )));
        }
        let mut w = Self::default();
        for (key, v) in map {
            match key.as_str() {
                "primary_email" => {
                    let e = string_or_null(key, v)?;
                    if let Some(e) = &e {
                        if !email::is_valid(e) {
                            return Err(schema("primary_email must be a valid e-mail address"));
                        }
                    }
                    w.primary_email = Some(e.map(|e| email::normalize(&e)));
                }
                "primary_email_verified" => w.primary_email_verified = Some(bool_of(key, v)?),
                "primary_email_auth_enabled" => {
                    w.primary_email_auth_enabled = Some(bool_of(key, v)?)
                }
                "display_name" => {
                    let name = string_or_null(key, v)?;
                    if name.as_ref().is_some_and(|n| n.chars().count() > 256) {
                        return Err(schema("display_name must be at most 256 characters"));
                    }
                    w.display_name = Some(name.filter(|n| !n.is_empty()));
                }
                "profile_image_url" => {
                    w.profile_image_url = Some(profile_image(string_or_null(key, v)?, mode)?)
                }
                "otp_auth_enabled" => w.otp_auth_enabled = Some(bool_of(key, v)?),
                "totp_secret_base64" => w.totp_secret = Some(totp_secret(v)?),
                "password" => {
                    let p = string_or_null(key, v)?;
                    if p.as_deref().is_some_and(|p| password_len(p) > 70) {
                        return Err(schema("password must be at most 70 characters"));
                    }
                    w.password = Some(p);
                }
                "password_hash" => {
                    let h = v
                        .as_str()
                        .ok_or_else(|| schema("password_hash must be a string"))?;
                    w.password_hash = Some(h.to_owned());
                }
                "client_metadata" => w.client_metadata = Some(v.clone()),
                "client_read_only_metadata" => w.client_read_only_metadata = Some(v.clone()),
                "server_metadata" => w.server_metadata = Some(v.clone()),
                "selected_team_id" => {
                    let id = string_or_null(key, v)?;
                    let id = id
                        .map(|s| {
                            uuid::Uuid::parse_str(&s)
                                .map_err(|_| schema("selected_team_id must be a UUID"))
                        })
                        .transpose()?;
                    w.selected_team_id = Some(id);
                }
                "restricted_by_admin" => w.restricted_by_admin = Some(bool_of(key, v)?),
                "restricted_by_admin_reason" => {
                    w.restricted_by_admin_reason = Some(string_or_null(key, v)?)
                }
                "restricted_by_admin_private_details" => {
                    w.restricted_by_admin_private_details = Some(string_or_null(key, v)?)
                }
                "is_anonymous" | "passkey_auth_enabled" if *v != Value::Bool(false) => {
                    bool_of(key, v)?;
                    return Err(Error::BadRequest(format!("{key} cannot be enabled")));
                }
                "passkey_auth_enabled" => w.remove_passkeys = true,
                "country_code" => {
                    let code = string_or_null(key, v)?.map(|c| c.trim().to_ascii_uppercase());
                    if code.as_ref().is_some_and(|c| {
                        c.len() != 2 || !c.chars().all(|ch| ch.is_ascii_uppercase())
                    }) {
                        return Err(schema("country_code must be an ISO 3166-1 alpha-2 code"));
                    }
                    w.country_code = Some(code);
                }
                "risk_scores" => w.risk_scores = Some(parse_risk(v)?),
                "oauth_providers" => {
                    w.oauth_providers = serde_json::from_value(v.clone())
                        .map_err(|e| schema(format!("oauth_providers: {e}")))?
                }
                _ => {}
            }
        }
        let restricted_flag = w.restricted_by_admin == Some(true);
        let reason_set = matches!(w.restricted_by_admin_reason, Some(Some(_)))
            || matches!(w.restricted_by_admin_private_details, Some(Some(_)));
        if reason_set && !restricted_flag {
            return Err(schema(
                "restricted_by_admin_reason and _private_details need restricted_by_admin: true",
            ));
        }
        if w.password.is_some() && w.password_hash.is_some() {
            return Err(Error::BadRequest(
                "send either password or password_hash, not both".into(),
            ));
        }
        if let Some(h) = &w.password_hash {
            if !latchkey_shared::password::is_bcrypt(h) {
                return Err(Error::InvalidPasswordHash);
            }
        }
        Ok(w)
    }

    /// Metadata fields as stored.
    pub fn metadata_text(v: &Value) -> String {
        v.to_string()
    }
}

fn parse_risk(v: &Value) -> Result<(i32, i32)> {
    let sign_up = v
        .get("sign_up")
        .and_then(Value::as_object)
        .ok_or_else(|| schema("risk_scores.sign_up is required"))?;
    let score = |m: &Map<String, Value>, k: &str| -> Result<i32> {
        m.get(k)
            .and_then(Value::as_i64)
            .filter(|n| (0..=100).contains(n))
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| {
                schema(format!(
                    "risk_scores.sign_up.{k} must be an integer from 0 to 100"
                ))
            })
    };
    Ok((score(sign_up, "bot")?, score(sign_up, "free_trial_abuse")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_sets_follow_the_caller() {
        assert!(UserWrite::parse(&json!({"server_metadata": 1}), Mode::ClientUpdate).is_err());
        assert!(UserWrite::parse(&json!({"server_metadata": 1}), Mode::ServerUpdate).is_ok());
        assert!(UserWrite::parse(&json!({"selected_team_id": null}), Mode::ServerCreate).is_err());
        assert!(UserWrite::parse(&json!({"nope": 1}), Mode::ServerUpdate).is_err());
    }

    #[test]
    fn values_are_checked() {
        let bad = [
            json!({"display_name": "x".repeat(257)}),
            json!({"country_code": "USA"}),
            json!({"risk_scores": {"sign_up": {"bot": 101, "free_trial_abuse": 0}}}),
            json!({"restricted_by_admin_reason": "spam"}),
            json!({"password": "p", "password_hash": "$2b$"}),
            json!({"password_hash": "plain"}),
            json!({"is_anonymous": true}),
        ];
        for body in bad {
            assert!(
                UserWrite::parse(&body, Mode::ServerUpdate).is_err(),
                "{body}"
            );
        }
        let ok = UserWrite::parse(
            &json!({"display_name": "", "country_code": " de "}),
            Mode::ServerUpdate,
        );
        let ok = ok.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.display_name, Some(None));
        assert_eq!(ok.country_code, Some(Some("DE".into())));
        assert!(matches!(
            UserWrite::parse(
                &json!({"profile_image_url": "https://x.example/a.png"}),
                Mode::ClientUpdate
            ),
            Err(Error::InvalidProfileImageUrl)
        ));
        assert!(UserWrite::parse(
            &json!({"profile_image_url": "data:image/png;base64,aGVsbG8="}),
            Mode::ClientUpdate
        )
        .is_ok());
    }
}
