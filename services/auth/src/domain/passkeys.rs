//! Passkeys (WebAuthn, Stack Auth's `/auth/passkey/*`, README "Passkeys"). Each ceremony is two
//! calls: an `initiate` call answers the browser's options and a single-use code that holds the
//! challenge for 65 seconds; the finishing call names the code and carries the authenticator's
//! answer, which webauthn-rs verifies.
//!
//! The relying party is the page's own host. The options carry Stack Auth's placeholder
//! relying-party id, which its SDK replaces with `window.location.hostname`; the finishing call
//! takes the origin from the signed client data, accepts it only if the project trusts it (its
//! domains, or localhost where allowed) and verifies against that origin and its host.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use latchkey_shared::codes::Code;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::events::Event;
use latchkey_shared::grpc::Context;
use latchkey_shared::urls;
use serde_json::{json, Value};
use uuid::Uuid;
use webauthn_rs::prelude::{
    DiscoverableAuthentication, Passkey, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Url, Webauthn, WebauthnBuilder,
};

use super::mfa::{self, SignedIn};
use super::settings::Settings;
use super::users;
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::passkeys::{Inserted, StoredPasskey};
use crate::store::StoreError;

/// The relying-party id the SDK replaces with the page's host.
pub const PLACEHOLDER_RP_ID: &str = "THIS_VALUE_WILL_BE_REPLACED.example.com";
const REGISTRATION_KIND: &str = "PASSKEY_REGISTRATION_CHALLENGE";
const AUTHENTICATION_KIND: &str = "PASSKEY_AUTHENTICATION_CHALLENGE";
/// How long the browser may take (the options' `timeout`); the code lives a little longer, for
/// the network.
const CEREMONY_TIMEOUT: Duration = Duration::from_secs(60);
const CHALLENGE_TTL_MILLIS: i64 = 65_000;
/// Enough for every device a person owns; the exclusion list of a registration names them all.
const MAX_PER_USER: usize = 20;

/// The options for `navigator.credentials.create` or `.get`, and the code that finishes it.
pub struct Challenge {
    pub options_json: Value,
    pub code: String,
}

fn not_enabled() -> Error {
    coded(
        ErrorCode::PasskeyAuthenticationNotEnabled,
        "Passkey authentication is not enabled for this project.",
    )
}

/// Stack Auth's SDK reads `details.message` of these two codes, so it is always present.
fn registration_failed(message: &str) -> Error {
    coded(ErrorCode::PasskeyRegistrationFailed, message).with_details(json!({ "message": message }))
}

fn authentication_failed(message: &str) -> Error {
    coded(ErrorCode::PasskeyAuthenticationFailed, message)
        .with_details(json!({ "message": message }))
}

async fn enabled_settings(app: &App, ctx: &Context) -> Result<std::sync::Arc<Settings>> {
    let (_, settings) = app.project(ctx.project_id).await?;
    if settings.passkey_enabled {
        Ok(settings)
    } else {
        Err(not_enabled())
    }
}

/// The relying party that issues challenges. Its id does not matter: the options are given the
/// placeholder (`with_placeholder`), which no browser accepts until the page replaces it.
fn issuer() -> Result<Webauthn> {
    let rp_id = PLACEHOLDER_RP_ID.to_ascii_lowercase();
    let misconfigured = |e: String| Error::BadRequest(format!("passkeys are misconfigured: {e}"));
    let origin =
        Url::parse(&format!("https://{rp_id}")).map_err(|e| misconfigured(e.to_string()))?;
    let built =
        WebauthnBuilder::new(&rp_id, &origin).and_then(|b| b.timeout(CEREMONY_TIMEOUT).build());
    built.map_err(|e| misconfigured(e.to_string()))
}

/// Options as the SDK expects them: it replaces the relying-party id only if it is exactly
/// the placeholder (URL rules lowercased the issuer's).
fn with_placeholder(options: impl serde::Serialize) -> Result<Value> {
    let mut options = serde_json::to_value(options).map_err(internal)?;
    if options["rp"].is_object() {
        options["rp"]["id"] = json!(PLACEHOLDER_RP_ID);
    } else {
        options["rpId"] = json!(PLACEHOLDER_RP_ID);
    }
    Ok(options)
}

/// The relying party that verifies an answer: the origin in the signed client data, if the
/// project trusts it, with its host as the relying-party id.
fn verifier(client_data_json: &[u8], settings: &Settings) -> Option<Webauthn> {
    let client_data: Value = serde_json::from_slice(client_data_json).ok()?;
    let origin = client_data["origin"].as_str()?;
    let domains: Vec<String> = settings.domains.iter().map(|d| d.domain.clone()).collect();
    if !urls::is_trusted(origin, settings.allow_localhost, &domains) {
        return None;
    }
    let origin = Url::parse(origin).ok()?;
    let host = origin.host_str()?.to_owned();
    WebauthnBuilder::new(&host, &origin).ok()?.build().ok()
}

/// Checks a finishing call's code and uses it up: a challenge is answered once, whether or not
/// the answer then verifies.
async fn take_code(app: &App, ctx: &Context, kind: &str, code: &str) -> Result<Code> {
    let found = app.codes.check(ctx.project_id, kind, code).await?;
    app.codes.consume(ctx.project_id, &found).await?;
    Ok(found)
}

/// The signed-in user a registration is for; anonymous users sign up first, since a passkey
/// would make a visitor's throwaway account one that can sign in.
async fn registering_user(app: &App, ctx: &Context) -> Result<Uuid> {
    let id = ctx.user_id.ok_or_else(|| {
        Error::Invalid("registering a passkey needs a signed-in user (an access token)".into())
    })?;
    let row = app
        .accounts
        .user(ctx.project_id, id)
        .await?
        .ok_or_else(|| users::not_found_for(ctx, id))?;
    if row.is_anonymous {
        return Err(coded(
            ErrorCode::AnonymousAuthenticationNotAllowed,
            "An anonymous user cannot register a passkey; sign up first.",
        ));
    }
    Ok(id)
}

fn credential_id_text(id: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(id)
}

/// `POST /auth/passkey/initiate-passkey-registration`: options that ask for a discoverable
/// credential with user verification, excluding the user's existing passkeys.
pub async fn initiate_registration(app: &App, ctx: &Context) -> Result<Challenge> {
    enabled_settings(app, ctx).await?;
    let user_id = registering_user(app, ctx).await?;
    let (user, (project, _), existing) = tokio::try_join!(
        users::get(app, ctx, user_id),
        app.project(ctx.project_id),
        async { Ok(app.passkeys.of_user(ctx.project_id, user_id).await?) },
    )?;
    // Checked again when the passkey is stored: several registrations may be under way.
    if existing.len() >= MAX_PER_USER {
        return Err(too_many());
    }
    let exclude = existing
        .iter()
        .filter_map(|p| URL_SAFE_NO_PAD.decode(&p.credential_id).ok())
        .collect();
    let name = user["primary_email"]
        .as_str()
        .or(user["display_name"].as_str())
        .unwrap_or("Latchkey user")
        .to_owned();
    let (options, state) = issuer()?
        .start_passkey_registration(user_id, &name, &name, Some(exclude))
        .map_err(|e| registration_failed(&format!("The options could not be made: {e}")))?;
    let mut options = with_placeholder(&options.public_key)?;
    options["rp"]["name"] = json!(project.display_name);
    // Sign-in finds the user from the credential, so it must be discoverable.
    options["authenticatorSelection"]["residentKey"] = json!("required");
    options["authenticatorSelection"]["requireResidentKey"] = json!(true);
    let data = json!({ "user_id": user_id, "state": state });
    let code = app
        .codes
        .create(
            ctx.project_id,
            REGISTRATION_KIND,
            &data,
            CHALLENGE_TTL_MILLIS,
        )
        .await?;
    Ok(Challenge {
        options_json: options,
        code,
    })
}

fn too_many() -> Error {
    registration_failed(&format!(
        "A user can have at most {MAX_PER_USER} passkeys; delete one first."
    ))
}

fn internal(e: serde_json::Error) -> Error {
    Error::BadRequest(format!("a passkey document could not be written: {e}"))
}

/// `POST /auth/passkey/register`: verifies the new credential against the code's challenge and
/// stores it for the user the code was issued to. Answers the credential id.
pub async fn register(app: &App, ctx: &Context, credential: &str, code: &str) -> Result<String> {
    let settings = enabled_settings(app, ctx).await?;
    let user_id = registering_user(app, ctx).await?;
    let found = take_code(app, ctx, REGISTRATION_KIND, code).await?;
    if found.data["user_id"].as_str() != Some(user_id.to_string().as_str()) {
        return Err(registration_failed(
            "The code was issued for another user's registration.",
        ));
    }
    let state: PasskeyRegistration = serde_json::from_value(found.data["state"].clone())
        .map_err(|_| registration_failed("The registration state is unreadable."))?;
    let credential: RegisterPublicKeyCredential = serde_json::from_str(credential)
        .map_err(|_| registration_failed("credential is not a WebAuthn registration response."))?;
    let verifier = verifier(&credential.response.client_data_json, &settings).ok_or_else(|| {
        registration_failed("Passkey registration failed because the origin is not allowed")
    })?;
    let passkey = verifier
        .finish_passkey_registration(&credential, &state)
        .map_err(|e| {
            registration_failed(&format!(
                "Passkey registration failed because the verification response is invalid: {e}"
            ))
        })?;
    let stored = StoredPasskey {
        project_id: ctx.project_id,
        id: Uuid::now_v7(),
        user_id,
        credential_id: credential_id_text(passkey.cred_id()),
        credential: serde_json::to_string(&passkey).map_err(internal)?,
        sign_count: counter_of(&passkey),
        created_at_millis: app.now(),
        last_used_at_millis: None,
    };
    let mut user = users::get(app, ctx, user_id).await?;
    user["passkey_auth_enabled"] = json!(true);
    let event = Event::new("user.updated", ctx.project_id, app.now(), user);
    match app
        .passkeys
        .insert(&stored, MAX_PER_USER as i64, &event)
        .await
    {
        Ok(Inserted::Done) => Ok(stored.credential_id),
        Ok(Inserted::Full) => Err(too_many()),
        Err(StoreError::Conflict) => Err(registration_failed(
            "This passkey is already registered in this project.",
        )),
        Err(StoreError::NotFound) => Err(users::not_found_for(ctx, user_id)),
        Err(e) => Err(e.into()),
    }
}

/// The signature counter as stored: webauthn-rs keeps it inside the serialized credential.
fn counter_of(passkey: &Passkey) -> i64 {
    serde_json::to_value(passkey)
        .ok()
        .and_then(|v| v["cred"]["counter"].as_i64())
        .unwrap_or(0)
}

/// `POST /auth/passkey/initiate-passkey-authentication`: options for a usernameless sign-in
/// (no credentials listed; the authenticator offers the ones it holds for the site).
pub async fn initiate_authentication(app: &App, ctx: &Context) -> Result<Challenge> {
    enabled_settings(app, ctx).await?;
    let (options, state) = issuer()?
        .start_discoverable_authentication()
        .map_err(|e| authentication_failed(&format!("The options could not be made: {e}")))?;
    let options_json = with_placeholder(&options.public_key)?;
    let data = json!({ "state": state });
    let code = app
        .codes
        .create(
            ctx.project_id,
            AUTHENTICATION_KIND,
            &data,
            CHALLENGE_TTL_MILLIS,
        )
        .await?;
    Ok(Challenge { options_json, code })
}

/// `POST /auth/passkey/sign-in`: finds the passkey from the credential id, checks that the
/// authenticator names its user, verifies the signature, the user verification and that the
/// counter moved forward, and records the new counter before signing in. A user with TOTP
/// still answers the second factor, as after any other sign-in.
pub async fn sign_in(app: &App, ctx: &Context, response: &str, code: &str) -> Result<SignedIn> {
    let settings = enabled_settings(app, ctx).await?;
    let found = take_code(app, ctx, AUTHENTICATION_KIND, code).await?;
    let state: DiscoverableAuthentication = serde_json::from_value(found.data["state"].clone())
        .map_err(|_| authentication_failed("The authentication state is unreadable."))?;
    let response: PublicKeyCredential = serde_json::from_str(response).map_err(|_| {
        authentication_failed("authentication_response is not a WebAuthn assertion.")
    })?;
    let verifier = verifier(&response.response.client_data_json, &settings).ok_or_else(|| {
        authentication_failed("Passkey authentication failed because the origin is not allowed")
    })?;
    let not_found = || authentication_failed("Passkey not found");
    let (user_handle, credential_id) = verifier
        .identify_discoverable_authentication(&response)
        .map_err(|_| not_found())?;
    let mut stored = app
        .passkeys
        .by_credential_id(ctx.project_id, &credential_id_text(credential_id))
        .await?
        .filter(|p| p.user_id == user_handle)
        .ok_or_else(not_found)?;
    let mut passkey: Passkey = serde_json::from_str(&stored.credential)
        .map_err(|_| authentication_failed("The stored passkey is unreadable."))?;
    let result = verifier
        .finish_discoverable_authentication_v2(&response, state, &passkey)
        .map_err(|_| {
            authentication_failed(
                "The signature of the authentication response could not be verified with the \
                 stored public key tied to this credential ID",
            )
        })?;
    passkey.update_credential(&result);
    let seen = stored.sign_count;
    stored.sign_count = counter_of(&passkey);
    stored.credential = serde_json::to_string(&passkey).map_err(internal)?;
    if !app.passkeys.record_use(&stored, seen, app.now()).await? {
        return Err(authentication_failed(
            "This passkey was used by another sign-in at the same moment; try again.",
        ));
    }
    mfa::sign_in(app, ctx, stored.user_id, false).await
}

/// A passkey as the API lists it. The credential itself is the authenticator's business.
fn view(p: &StoredPasskey) -> Value {
    json!({
        "id": p.id,
        "credential_id": p.credential_id,
        "created_at_millis": p.created_at_millis,
        "last_used_at_millis": p.last_used_at_millis,
    })
}

/// `GET /users/{user_id}/passkeys`: the user's passkeys, oldest first.
pub async fn list(app: &App, ctx: &Context, user_id: Uuid) -> Result<Vec<Value>> {
    let (row, found) = tokio::try_join!(
        async { Ok::<_, Error>(app.accounts.user(ctx.project_id, user_id).await?) },
        async { Ok(app.passkeys.of_user(ctx.project_id, user_id).await?) },
    )?;
    row.ok_or_else(|| users::not_found_for(ctx, user_id))?;
    Ok(found.iter().map(view).collect())
}

/// `DELETE /users/{user_id}/passkeys/{id}`, or every passkey of the user (`id` None, from
/// `passkey_auth_enabled: false` on the user). Sends `user.updated` when any was deleted.
pub async fn delete(app: &App, ctx: &Context, user_id: Uuid, id: Option<Uuid>) -> Result<()> {
    let user = users::get(app, ctx, user_id).await?;
    let now = app.now();
    let event_for = |left: bool| {
        let mut user = user;
        user["passkey_auth_enabled"] = json!(left);
        Event::new("user.updated", ctx.project_id, now, user)
    };
    let deleted = app
        .passkeys
        .delete(ctx.project_id, user_id, id, event_for)
        .await?;
    match id {
        Some(id) if deleted == 0 => Err(coded(
            ErrorCode::PasskeyNotFound,
            format!("The user has no passkey with id {id}."),
        )),
        _ => Ok(()),
    }
}
