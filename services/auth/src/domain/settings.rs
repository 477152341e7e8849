//! A project's settings document (50 §6 with 80 §2): defaults, validation, partial updates,
//! the admin view (secrets write-only) and the public view of `/projects/current`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Rate-limit buckets of 70 §7.1 and their defaults: (name, limit, window seconds).
pub use latchkey_shared::limits::BUCKETS as RATE_LIMIT_BUCKETS;

use latchkey_shared::providers::PROVIDER_TYPES;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub sign_up_enabled: bool,
    pub credential_enabled: bool,
    pub magic_link_enabled: bool,
    pub client_team_creation_enabled: bool,
    pub client_user_deletion_enabled: bool,
    pub allow_user_api_keys: bool,
    pub allow_team_api_keys: bool,
    /// Sign-in and registration by passkey (`/auth/passkey/*`).
    pub passkey_enabled: bool,
    /// Anonymous users older than this are deleted; None keeps them.
    pub anonymous_user_max_age_seconds: Option<u64>,
    pub create_team_on_sign_up: bool,
    pub require_email_verification: bool,
    pub allow_localhost: bool,
    pub domains: Vec<Domain>,
    pub oauth_providers: Vec<OAuthProvider>,
    pub oauth_account_merge_strategy: MergeStrategy,
    pub team_creator_default_permissions: Vec<PermissionRef>,
    pub team_member_default_permissions: Vec<PermissionRef>,
    pub user_default_permissions: Vec<PermissionRef>,
    pub password_min_length: u32,
    pub reject_common_passwords: bool,
    pub refresh_token_rotation: bool,
    pub otp_code_lifetime_seconds: u32,
    pub password_reset_code_lifetime_seconds: u32,
    /// Overrides only: a bucket mapped to `None` is disabled; absent buckets keep defaults.
    pub rate_limits: BTreeMap<String, Option<RateLimit>>,
    pub email: Option<Email>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            sign_up_enabled: true,
            credential_enabled: true,
            magic_link_enabled: false,
            client_team_creation_enabled: false,
            client_user_deletion_enabled: false,
            allow_user_api_keys: false,
            allow_team_api_keys: false,
            passkey_enabled: false,
            anonymous_user_max_age_seconds: None,
            create_team_on_sign_up: false,
            require_email_verification: false,
            allow_localhost: false,
            domains: Vec::new(),
            oauth_providers: Vec::new(),
            oauth_account_merge_strategy: MergeStrategy::LinkMethod,
            team_creator_default_permissions: vec![PermissionRef::new("team_admin")],
            team_member_default_permissions: vec![PermissionRef::new("team_member")],
            user_default_permissions: Vec::new(),
            password_min_length: 8,
            reject_common_passwords: true,
            refresh_token_rotation: false,
            otp_code_lifetime_seconds: 600,
            password_reset_code_lifetime_seconds: 3600,
            rate_limits: BTreeMap::new(),
            email: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    pub domain: String,
    #[serde(default = "default_handler_path")]
    pub handler_path: String,
}

fn default_handler_path() -> String {
    "/handler".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionRef {
    pub id: String,
}

impl PermissionRef {
    fn new(id: &str) -> Self {
        Self { id: id.into() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeStrategy {
    LinkMethod,
    RaiseError,
    AllowDuplicates,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub limit: u32,
    pub window_seconds: u32,
}

/// Provider settings (80 §11.3). `client_secret` is write-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthProvider {
    pub id: String,
    #[serde(rename = "type")]
    pub provider_type: String,
    #[serde(default)]
    pub shared: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub userinfo_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id_field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_verified_field: Option<String>,
    #[serde(default = "yes")]
    pub allow_sign_in: bool,
    #[serde(default)]
    pub allow_connected_accounts: bool,
}

fn yes() -> bool {
    true
}

impl OAuthProvider {
    /// Whether both talk to the same servers, so a secret meant for one may go to the other.
    fn same_servers(&self, other: &Self) -> bool {
        (
            &self.provider_type,
            &self.issuer,
            &self.authorization_endpoint,
            &self.token_endpoint,
            &self.userinfo_endpoint,
        ) == (
            &other.provider_type,
            &other.issuer,
            &other.authorization_endpoint,
            &other.token_endpoint,
            &other.userinfo_endpoint,
        )
    }
}

/// Per-project mail settings (80 §4). The SMTP URL may carry a password, so it is write-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Email {
    pub smtp_url: String,
    pub from: String,
}

/// Why a settings document or patch was refused; becomes `SCHEMA_ERROR`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Settings {
    pub fn from_json(text: &str) -> Result<Self, Invalid> {
        serde_json::from_str(text).map_err(|e| Invalid(e.to_string()))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// Applies a partial document (80 §2). Top-level keys replace; `rate_limits` merges per
    /// bucket; a provider sent without `client_secret` keeps the one stored under its id.
    /// Returns the new settings and, if present, the new display name.
    pub fn patch(&self, patch: &Value) -> Result<(Self, Option<String>), Invalid> {
        let Value::Object(patch) = patch else {
            return Err(Invalid("the body must be a JSON object".into()));
        };
        let mut doc = match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let mut display_name = None;
        for (key, value) in patch {
            match key.as_str() {
                "display_name" => display_name = Some(parse_display_name(value)?),
                "rate_limits" => merge_rate_limits(&mut doc, value)?,
                "oauth_providers" => {
                    doc.insert(key.clone(), self.keep_provider_secrets(value)?);
                }
                "email" => {
                    doc.insert(key.clone(), self.keep_smtp_password(value)?);
                }
                _ if doc.contains_key(key) => {
                    doc.insert(key.clone(), value.clone());
                }
                _ => return Err(Invalid(format!("unknown property: {key}"))),
            }
        }
        let settings: Self =
            serde_json::from_value(Value::Object(doc)).map_err(|e| Invalid(e.to_string()))?;
        settings.validate()?;
        Ok((settings, display_name))
    }

    /// What the admin view shows can be sent back as it is: its `client_secret_set` markers
    /// are read, not stored, and `client_secret_set: false` removes a stored secret.
    fn keep_provider_secrets(&self, value: &Value) -> Result<Value, Invalid> {
        let mut value = value.clone();
        let mut removed = std::collections::HashSet::new();
        if let Value::Array(items) = &mut value {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                if item.remove("client_secret_set") == Some(Value::Bool(false)) {
                    removed.extend(item.get("id").and_then(Value::as_str).map(str::to_owned));
                }
            }
        }
        let mut providers: Vec<OAuthProvider> =
            serde_json::from_value(value).map_err(|e| Invalid(format!("oauth_providers: {e}")))?;
        for p in &mut providers {
            let Some(old) = self.oauth_providers.iter().find(|old| old.id == p.id) else {
                continue;
            };
            if p.client_secret.is_some() || removed.contains(&p.id) || old.client_secret.is_none() {
                continue;
            }
            // The secret goes where the provider's endpoints say: kept only while they do not
            // change, so no one can redirect a stored secret to a server of their choosing.
            if !old.same_servers(p) {
                return Err(Invalid(format!(
                    "provider {}: its type, issuer or endpoints changed, so its client_secret must be sent again",
                    p.id
                )));
            }
            p.client_secret = old.client_secret.clone();
        }
        serde_json::to_value(providers).map_err(|e| Invalid(e.to_string()))
    }

    /// As for providers: the admin view's `smtp_url` has its password taken out, so that URL
    /// sent back unchanged keeps the stored password; any other URL (another server, port,
    /// account or TLS mode) must bring its own, so a stored password never goes anywhere it
    /// was not meant for. `smtp_password_set: false` removes it.
    fn keep_smtp_password(&self, value: &Value) -> Result<Value, Invalid> {
        let mut value = value.clone();
        let Value::Object(email) = &mut value else {
            return Ok(value);
        };
        let keep = email.remove("smtp_password_set") != Some(Value::Bool(false));
        let stored = self
            .email
            .as_ref()
            .and_then(|e| url::Url::parse(&e.smtp_url).ok());
        let sent = email.get("smtp_url").and_then(Value::as_str);
        if let (true, Some(stored), Some(sent)) = (keep, stored, sent) {
            let mut shown = stored.clone();
            let _ = shown.set_password(None);
            if stored.password().is_some() && shown.as_str() == sent {
                email.insert("smtp_url".into(), Value::String(stored.to_string()));
            }
        }
        Ok(value)
    }

    pub fn validate(&self) -> Result<(), Invalid> {
        if self
            .anonymous_user_max_age_seconds
            .is_some_and(|s| !(1..=10 * 365 * 24 * 3600).contains(&s))
        {
            return Err(Invalid(
                "anonymous_user_max_age_seconds must be between 1 and 315360000, or null".into(),
            ));
        }
        if !(8..=64).contains(&self.password_min_length) {
            return Err(Invalid(
                "password_min_length must be between 8 and 64".into(),
            ));
        }
        if self.otp_code_lifetime_seconds == 0 || self.password_reset_code_lifetime_seconds == 0 {
            return Err(Invalid("code lifetimes must be positive".into()));
        }
        for d in &self.domains {
            let url = url::Url::parse(&d.domain.replace("*.", "wildcard."))
                .map_err(|_| Invalid(format!("domain is not an absolute URL: {}", d.domain)))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(Invalid(format!("domain must be http(s): {}", d.domain)));
            }
            if !d.handler_path.starts_with('/') {
                return Err(Invalid("handler_path must start with /".into()));
            }
        }
        let mut ids = std::collections::HashSet::new();
        for p in &self.oauth_providers {
            validate_provider(p)?;
            if !ids.insert(p.id.as_str()) {
                return Err(Invalid(format!("duplicate provider id: {}", p.id)));
            }
        }
        for (bucket, limit) in &self.rate_limits {
            if !RATE_LIMIT_BUCKETS.iter().any(|(name, _, _)| name == bucket) {
                return Err(Invalid(format!("unknown rate-limit bucket: {bucket}")));
            }
            if let Some(l) = limit {
                if l.limit == 0 || l.window_seconds == 0 {
                    return Err(Invalid(format!(
                        "{bucket}: limit and window must be positive"
                    )));
                }
            }
        }
        if let Some(email) = &self.email {
            let url = url::Url::parse(&email.smtp_url)
                .map_err(|_| Invalid("email.smtp_url is not a URL".into()))?;
            if !matches!(url.scheme(), "smtp" | "smtps") {
                return Err(Invalid("email.smtp_url must be smtp:// or smtps://".into()));
            }
            if !email.from.contains('@') {
                return Err(Invalid("email.from must be an e-mail address".into()));
            }
        }
        Ok(())
    }

    /// Every bucket with its effective value, `null` when disabled (80 §11.2).
    pub fn effective_rate_limits(&self) -> Map<String, Value> {
        RATE_LIMIT_BUCKETS
            .iter()
            .map(|(name, limit, window)| {
                let value = match self.rate_limits.get(*name) {
                    Some(Some(l)) => json!({"limit": l.limit, "window_seconds": l.window_seconds}),
                    Some(None) => Value::Null,
                    None => json!({"limit": limit, "window_seconds": window}),
                };
                ((*name).to_owned(), value)
            })
            .collect()
    }

    /// The admin view (80 §2): everything but keys, secrets replaced by `*_set` flags.
    pub fn admin_view(&self, id: uuid::Uuid, display_name: &str) -> Value {
        let mut doc = match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        doc.insert("id".into(), json!(id));
        doc.insert("display_name".into(), json!(display_name));
        doc.insert(
            "rate_limits".into(),
            Value::Object(self.effective_rate_limits()),
        );
        let providers: Vec<Value> = self
            .oauth_providers
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p).unwrap_or_default();
                if let Value::Object(m) = &mut v {
                    m.remove("client_secret");
                    m.insert("client_secret_set".into(), json!(p.client_secret.is_some()));
                }
                v
            })
            .collect();
        doc.insert("oauth_providers".into(), Value::Array(providers));
        let email = self.email.as_ref().map(|e| {
            let mut url = url::Url::parse(&e.smtp_url).ok();
            let password_set = url.as_ref().is_some_and(|u| u.password().is_some());
            if let Some(u) = url.as_mut() {
                let _ = u.set_password(None);
            }
            json!({
                "smtp_url": url.map(|u| u.to_string()),
                "smtp_password_set": password_set,
                "from": e.from,
            })
        });
        doc.insert("email".into(), email.unwrap_or(Value::Null));
        Value::Object(doc)
    }

    /// The `config` object of `/projects/current` (50 §5).
    pub fn public_config(&self) -> Value {
        let mut providers: Vec<&str> = self
            .oauth_providers
            .iter()
            .filter(|p| p.allow_sign_in)
            .map(|p| p.id.as_str())
            .collect();
        providers.sort_unstable();
        let mut domains = self.domains.clone();
        domains.sort_by(|a, b| a.domain.cmp(&b.domain));
        json!({
            "sign_up_enabled": self.sign_up_enabled,
            "credential_enabled": self.credential_enabled,
            "magic_link_enabled": self.magic_link_enabled,
            "passkey_enabled": self.passkey_enabled,
            "client_team_creation_enabled": self.client_team_creation_enabled,
            "client_user_deletion_enabled": self.client_user_deletion_enabled,
            "allow_user_api_keys": self.allow_user_api_keys,
            "allow_team_api_keys": self.allow_team_api_keys,
            "enabled_oauth_providers": providers.iter().map(|id| json!({"id": id})).collect::<Vec<_>>(),
            "allow_localhost": self.allow_localhost,
            "domains": domains,
        })
    }
}

fn parse_display_name(value: &Value) -> Result<String, Invalid> {
    match value.as_str().map(str::trim) {
        Some(name) if !name.is_empty() && name.chars().count() <= 256 => Ok(name.to_owned()),
        _ => Err(Invalid(
            "display_name must be a non-empty string of at most 256 characters".into(),
        )),
    }
}

fn merge_rate_limits(doc: &mut Map<String, Value>, value: &Value) -> Result<(), Invalid> {
    let Value::Object(changes) = value else {
        return Err(Invalid("rate_limits must be an object".into()));
    };
    let entry = doc
        .entry("rate_limits")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(current) = entry {
        for (bucket, limit) in changes {
            current.insert(bucket.clone(), limit.clone());
        }
    }
    Ok(())
}

fn validate_provider(p: &OAuthProvider) -> Result<(), Invalid> {
    let id_ok = !p.id.is_empty()
        && p.id.len() <= 64
        && p.id
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
    if !id_ok {
        return Err(Invalid(format!(
            "provider id must match ^[a-z0-9_-]+$: {}",
            p.id
        )));
    }
    if !PROVIDER_TYPES.contains(&p.provider_type.as_str()) {
        return Err(Invalid(format!(
            "unknown provider type: {}",
            p.provider_type
        )));
    }
    let generic = matches!(p.provider_type.as_str(), "oidc" | "oauth2");
    if (generic || !p.shared) && (p.client_id.is_none() || p.client_secret.is_none()) {
        return Err(Invalid(format!(
            "provider {} needs client_id and client_secret",
            p.id
        )));
    }
    if p.provider_type == "oidc" && p.issuer.is_none() {
        return Err(Invalid(format!("oidc provider {} needs an issuer", p.id)));
    }
    if p.provider_type == "oauth2"
        && (p.authorization_endpoint.is_none()
            || p.token_endpoint.is_none()
            || p.userinfo_endpoint.is_none())
    {
        return Err(Invalid(format!(
            "oauth2 provider {} needs authorization, token and userinfo endpoints",
            p.id
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let s = Settings::default();
        assert!(s.sign_up_enabled && s.credential_enabled && !s.magic_link_enabled);
        assert_eq!(s.password_min_length, 8);
        let limits = s.effective_rate_limits();
        assert_eq!(
            limits["client_auth_sensitive"],
            json!({"limit": 100, "window_seconds": 60})
        );
        assert_eq!(limits.len(), 7);
        assert_eq!(
            limits["password_guesses_per_email_and_ip"],
            json!({"limit": 10, "window_seconds": 900})
        );
    }

    #[test]
    fn patch_rejects_unknown_and_out_of_range() {
        let s = Settings::default();
        assert!(s.patch(&json!({"nope": true})).is_err());
        assert!(s.patch(&json!({"password_min_length": 7})).is_err());
        assert!(s.patch(&json!({"password_min_length": 65})).is_err());
        assert!(s.patch(&json!({"sign_up_enabled": "yes"})).is_err());
        assert!(s.patch(&json!({"rate_limits": {"bogus": null}})).is_err());
        assert!(s.patch(&json!([])).is_err());
    }

    #[test]
    fn rate_limits_merge_per_bucket_and_null_disables() {
        let s = Settings::default();
        let (s, _) = s
            .patch(&json!({"rate_limits": {"client_general": null}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let (s, _) = s
            .patch(&json!({"rate_limits": {"server_general": {"limit": 5, "window_seconds": 1}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let eff = s.effective_rate_limits();
        assert_eq!(eff["client_general"], Value::Null);
        assert_eq!(
            eff["server_general"],
            json!({"limit": 5, "window_seconds": 1})
        );
        assert_eq!(eff["unauthenticated"]["limit"], 600);
    }

    #[test]
    fn provider_secrets_are_write_only_and_kept() {
        let s = Settings::default();
        let provider = json!({"id": "corp", "type": "oidc", "client_id": "c", "client_secret": "s3cret", "issuer": "https://id.example.com"});
        let (s, _) = s
            .patch(&json!({"oauth_providers": [provider]}))
            .unwrap_or_else(|e| panic!("{e}"));
        let view = s.admin_view(uuid::Uuid::nil(), "P");
        assert!(!view.to_string().contains("s3cret"));
        assert_eq!(view["oauth_providers"][0]["client_secret_set"], true);
        let resend = json!({"id": "corp", "type": "oidc", "client_id": "c2", "issuer": "https://id.example.com"});
        let (s, _) = s
            .patch(&json!({"oauth_providers": [resend]}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.oauth_providers[0].client_secret.as_deref(),
            Some("s3cret")
        );
        assert_eq!(
            s.public_config()["enabled_oauth_providers"],
            json!([{"id": "corp"}])
        );
    }

    #[test]
    fn every_provider_type_the_auth_service_knows_is_accepted() {
        for t in PROVIDER_TYPES {
            let provider = json!({"id": "p", "type": t, "client_id": "c", "client_secret": "s",
                "issuer": "https://id.example.com", "authorization_endpoint": "https://id.example.com/a",
                "token_endpoint": "https://id.example.com/t", "userinfo_endpoint": "https://id.example.com/u"});
            let patched = Settings::default().patch(&json!({"oauth_providers": [provider]}));
            assert!(patched.is_ok(), "{t}: {patched:?}");
        }
    }

    #[test]
    fn the_admin_view_round_trips_without_losing_secrets() {
        let s = Settings::default();
        let provider = json!({"id": "corp", "type": "oidc", "client_id": "c", "client_secret": "s3cret", "issuer": "https://id.example.com"});
        let email =
            json!({"smtp_url": "smtps://mailer:pw@mail.example.com:465", "from": "a@example.com"});
        let (s, _) = s
            .patch(&json!({"oauth_providers": [provider], "email": email}))
            .unwrap_or_else(|e| panic!("{e}"));
        let view = s.admin_view(uuid::Uuid::nil(), "P");
        assert_eq!(view["email"]["smtp_password_set"], true);
        assert!(!view.to_string().contains("pw@"));
        let mut edited = view["email"].clone();
        edited["from"] = json!("b@example.com");
        let (s, _) = s
            .patch(&json!({"oauth_providers": view["oauth_providers"], "email": edited}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.oauth_providers[0].client_secret.as_deref(),
            Some("s3cret")
        );
        let stored = s.email.clone().unwrap_or_else(|| panic!("email"));
        assert_eq!(stored.smtp_url, "smtps://mailer:pw@mail.example.com:465");
        assert_eq!(stored.from, "b@example.com");
        // Another server does not inherit the password; false markers remove secrets.
        let (moved, _) = s
            .patch(&json!({"email": {"smtp_url": "smtps://mailer@other.example.com:465", "from": "b@example.com"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            moved.email.map(|e| e.smtp_url).as_deref(),
            Some("smtps://mailer@other.example.com:465")
        );
        let mut cleared = s.admin_view(uuid::Uuid::nil(), "P")["email"].clone();
        cleared["smtp_password_set"] = json!(false);
        let (cleared, _) = s
            .patch(&json!({"email": cleared}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cleared.email.map(|e| e.smtp_url).as_deref(),
            Some("smtps://mailer@mail.example.com:465")
        );
        // A stored secret follows neither a changed issuer nor a weaker TLS mode.
        let mut moved = view["oauth_providers"][0].clone();
        moved["issuer"] = json!("https://attacker.example.com");
        let refused = s.patch(&json!({"oauth_providers": [moved]}));
        assert!(
            refused.is_err_and(|e| e.0.contains("must be sent again")),
            "the secret followed a changed issuer"
        );
        let (tls, _) = Settings::default()
            .patch(&json!({"email": {"smtp_url": "smtp://u:pw@mail.example.com?tls=required", "from": "a@example.com"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let (plain, _) = tls
            .patch(&json!({"email": {"smtp_url": "smtp://u@mail.example.com", "from": "a@example.com"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            plain.email.map(|e| e.smtp_url).as_deref(),
            Some("smtp://u@mail.example.com")
        );
        // `client_secret_set: false` removes a secret, here of a shared named provider.
        let (named, _) = Settings::default()
            .patch(&json!({"oauth_providers": [{"id": "gh", "type": "github", "shared": true, "client_id": "c", "client_secret": "s"}]}))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut cleared = named.admin_view(uuid::Uuid::nil(), "P")["oauth_providers"][0].clone();
        cleared["client_secret_set"] = json!(false);
        let (cleared, _) = named
            .patch(&json!({"oauth_providers": [cleared]}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cleared.oauth_providers[0].client_secret, None);
    }
}
