//! What the auth domain works with: its stores, the contacts service, the password hasher, the
//! clock and the public base URL tokens are issued under.

use std::sync::Arc;

use latchkey_proto::contacts::v1::contacts_client::ContactsClient;
use latchkey_shared::clock::SharedClock;
use latchkey_shared::codes::Codes;
use latchkey_shared::grpc::Channel;
use latchkey_shared::grpc::{Context, PresentCaller};
use latchkey_shared::password::Passwords;
use tonic::service::interceptor::InterceptedService;
use uuid::Uuid;

use crate::domain::settings::Settings;
use crate::error::Result;
use crate::store::accounts::Accounts;
use crate::store::oauth::OAuthAccounts;
use crate::store::{Project, ProjectStore};

pub type Contacts = ContactsClient<InterceptedService<Channel, PresentCaller>>;
pub type Teams = latchkey_proto::teams::v1::teams_client::TeamsClient<
    InterceptedService<Channel, PresentCaller>,
>;

pub struct App {
    pub projects: Arc<dyn ProjectStore>,
    pub accounts: Accounts,
    pub cli_logins: crate::store::cli_logins::CliLogins,
    pub owned_keys: crate::store::owned_keys::OwnedKeys,
    pub passkeys: crate::store::passkeys::Passkeys,
    pub oauth: OAuthAccounts,
    /// For calls to OAuth providers: bounded in time, never following redirects.
    pub http: reqwest::Client,
    pub discovery: crate::domain::oauth::provider::Discovery,
    pub codes: Codes,
    pub passwords: Passwords,
    pub contacts: Contacts,
    pub teams: Teams,
    pub clock: SharedClock,
    /// Seals what must be stored but read back (TOTP seeds).
    pub secrets: latchkey_shared::sealed::SecretsKey,
    /// e.g. `https://auth.example.com`; issuers are `<this>/api/v1/projects/<id>`.
    pub public_url: String,
    /// Signing keys ready to sign access tokens.
    pub key_pairs: crate::domain::signing::KeyPairs,
    /// Parsed settings by project, with the settings version they were parsed from.
    pub settings: std::sync::Mutex<std::collections::HashMap<Uuid, (i64, Arc<Settings>)>>,
}

impl App {
    pub fn now(&self) -> i64 {
        self.clock.now_millis()
    }

    /// The project and its settings, parsed once per settings version: nearly every call reads
    /// them, and the row itself is remembered by the caching store.
    pub async fn project(&self, id: Uuid) -> Result<(Project, Arc<Settings>)> {
        let project = self
            .projects
            .project(id)
            .await?
            .ok_or(crate::error::Error::ProjectNotFound(id))?;
        let known = self.settings.lock().ok().and_then(|parsed| {
            parsed
                .get(&id)
                .filter(|(version, _)| *version == project.settings_version)
                .map(|(_, settings)| settings.clone())
        });
        let settings = match known {
            Some(settings) => settings,
            None => {
                let settings = Arc::new(Settings::from_json(&project.settings)?);
                if let Ok(mut parsed) = self.settings.lock() {
                    if parsed.len() >= 10_000 {
                        parsed.clear();
                    }
                    parsed.insert(id, (project.settings_version, settings.clone()));
                }
                settings
            }
        };
        Ok((project, settings))
    }

    /// A client for one call to contacts, carrying the caller's context.
    pub fn contacts(&self) -> Contacts {
        self.contacts.clone()
    }

    pub fn teams(&self) -> Teams {
        self.teams.clone()
    }

    /// Wraps a message for another service (contacts, teams) with the project of `ctx`, as a
    /// server-level component.
    pub fn to_service<T>(&self, ctx: &Context, message: T) -> tonic::Request<T> {
        let mut inner = ctx.clone();
        inner.access_type = latchkey_shared::headers::AccessType::Server;
        inner.request(message)
    }
}
