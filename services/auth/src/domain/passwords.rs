//! Password sign-up, sign-in, change, set and reset (10 §1, 80 §10).

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use latchkey_proto::contacts::v1 as contacts;
use latchkey_shared::codes;
use latchkey_shared::email;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use serde_json::{json, Value};
use uuid::Uuid;

use super::anonymous;
use super::mail::{auth_owner, auth_user, mail_override, require_trusted};
use super::sessions::{self, Tokens};
use super::settings::Settings;
use super::user_write::password_len;
use super::users;
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::accounts::Revoke;

pub const RESET_KIND: &str = "PASSWORD_RESET";
const MAX_LEN: usize = 70;

static COMMON: OnceLock<HashSet<&'static str>> = OnceLock::new();

fn common_passwords() -> &'static HashSet<&'static str> {
    COMMON.get_or_init(|| {
        include_str!("../../data/common-passwords.txt")
            .lines()
            .collect()
    })
}

/// Refuses passwords from the common list (80 §10), compared case-insensitively.
pub fn check_common(password: &str, settings: &Settings) -> Result<()> {
    if settings.reject_common_passwords
        && common_passwords().contains(password.to_lowercase().as_str())
    {
        return Err(coded(
            ErrorCode::PasswordTooCommon,
            "This password is too common; choose another.",
        ));
    }
    Ok(())
}

/// The rules a client-chosen password must meet, in the order of 10 §1.3.
fn check_new(password: &str, settings: &Settings) -> Result<()> {
    if password_len(password) > MAX_LEN {
        return Err(Error::Invalid(
            "password must be at most 70 characters".into(),
        ));
    }
    let min = settings.password_min_length;
    if password_len(password) < min as usize {
        return Err(coded(
            ErrorCode::PasswordTooShort,
            format!("The password must be at least {min} characters."),
        )
        .with_details(json!({ "min_length": min })));
    }
    check_common(password, settings)
}

fn require_credential(settings: &Settings) -> Result<()> {
    if settings.credential_enabled {
        Ok(())
    } else {
        Err(coded(
            ErrorCode::PasswordAuthenticationNotEnabled,
            "Password authentication is not enabled.",
        ))
    }
}

/// `POST /auth/password/sign-up` (10 §1.4.1).
pub async fn sign_up(
    app: &App,
    ctx: &Context,
    address: &str,
    password: &str,
    verify_url: Option<&str>,
) -> Result<(Value, Tokens)> {
    if !email::is_strict(address) {
        return Err(Error::Invalid(
            "email must be a valid e-mail address".into(),
        ));
    }
    if password_len(password) > MAX_LEN {
        return Err(Error::Invalid(
            "password must be at most 70 characters".into(),
        ));
    }
    let (project, settings) = app.project(ctx.project_id).await?;
    require_credential(&settings)?;
    if let Some(url) = verify_url {
        require_trusted(url, &settings)?;
    }
    if !settings.sign_up_enabled {
        return Err(coded(
            ErrorCode::SignUpNotEnabled,
            "Sign-up is not enabled for this project.",
        ));
    }
    check_new(password, &settings)?;
    let address = email::normalize(address);
    let now = app.now();
    let anonymous = anonymous::caller(app, ctx).await?;
    let upgrading = anonymous.is_some();
    let mut row = anonymous.unwrap_or_else(|| users::new_row(ctx.project_id, now));
    let user_id = row.id;
    row.password_hash = Some(app.passwords.hash(password).await?);

    let channel_id = users::reserve_email(app, ctx, user_id, &address, false, true)
        .await
        .map_err(|e| anonymous::reservation_refused(upgrading, e))?;
    let (user, tokens) = if upgrading {
        anonymous::upgrade(app, ctx, row, &settings, Some(channel_id)).await?;
        let user = users::get(app, ctx, user_id).await?;
        let tokens =
            sessions::open(app, ctx, &user, sessions::DEFAULT_LIFETIME_MILLIS, false).await?;
        (user, tokens)
    } else {
        let (session, refresh_token) = sessions::new_session(
            ctx.project_id,
            user_id,
            now,
            sessions::DEFAULT_LIFETIME_MILLIS,
            false,
        );
        let session_id = session.session.id;
        let (user, _) =
            users::finish_create(app, ctx, row, &settings, Some(channel_id), Some(session)).await?;
        let tokens =
            sessions::tokens_for(app, ctx.project_id, &user, session_id, refresh_token).await?;
        (user, tokens)
    };

    if let Some(url) = verify_url {
        let request = contacts::SendVerificationCodeRequest {
            user_id: user_id.to_string(),
            email: address.clone(),
            callback_url: url.to_owned(),
            mail: mail_override(&settings),
            project_name: project.display_name.clone(),
        };
        // Sent in the background: the response does not wait for mail (10 §1.4.1).
        let mut client = app.contacts();
        let request = app.to_service(ctx, request);
        tokio::spawn(async move {
            if let Err(e) = client.send_verification_code(request).await {
                tracing::warn!(error = %e, "could not send the sign-up verification mail");
            }
        });
    }
    Ok((user, tokens))
}

fn mismatch() -> Error {
    coded(
        ErrorCode::EmailPasswordMismatch,
        "Wrong e-mail or password.",
    )
}

/// `POST /auth/password/sign-in` (10 §1.4.2). Unknown e-mail, no password and wrong password
/// answer alike, after the same hashing work.
pub async fn sign_in(
    app: &App,
    ctx: &Context,
    address: &str,
    password: &str,
) -> Result<(Value, Tokens)> {
    if !email::is_valid(address) || password_len(password) > MAX_LEN {
        return Err(Error::Invalid(
            "email must be an e-mail address and password at most 70 characters".into(),
        ));
    }
    let (_, settings) = app.project(ctx.project_id).await?;
    require_credential(&settings)?;
    let (user_id, channels) = auth_owner(app, ctx, address).await?.unzip();
    // An unknown address reads a row too (the nil id, which never exists), so both take the
    // same steps: sign-in time must not tell whether an account exists.
    let row = app
        .accounts
        .user_from_database(ctx.project_id, user_id.unwrap_or(Uuid::nil()))
        .await?;
    let stored = row.as_ref().and_then(|r| r.password_hash.as_deref());
    let matches = app.passwords.verify(password, stored).await?;
    let Some(row) = row.filter(|_| matches) else {
        return Err(mismatch());
    };
    let channels = channels.unwrap_or_default();
    let signed_in = super::mfa::sign_in_as(app, ctx, &row, &channels, &settings, false).await?;
    Ok((signed_in.user, signed_in.tokens))
}

/// `POST /auth/password/update`: ends every other session (all of them without a refresh token).
pub async fn update(
    app: &App,
    ctx: &Context,
    old: &str,
    new: &str,
    keep_refresh_token: Option<&str>,
) -> Result<()> {
    let user_id = ctx
        .user_id
        .ok_or_else(|| coded(ErrorCode::UserAuthenticationRequired, "Sign in first."))?;
    if password_len(old) > MAX_LEN {
        return Err(Error::Invalid(
            "old_password must be at most 70 characters".into(),
        ));
    }
    let (_, settings) = app.project(ctx.project_id).await?;
    require_credential(&settings)?;
    check_new(new, &settings)?;
    let mut row = app
        .accounts
        .user(ctx.project_id, user_id)
        .await?
        .ok_or_else(|| users::not_found_for(ctx, user_id))?;
    let Some(stored) = row.password_hash.clone() else {
        return Err(coded(
            ErrorCode::UserDoesNotHavePassword,
            "The user has no password; set one instead.",
        ));
    };
    if !app.passwords.verify(old, Some(&stored)).await? {
        return Err(coded(
            ErrorCode::PasswordConfirmationMismatch,
            "The old password is wrong.",
        ));
    }
    row.password_hash = Some(app.passwords.hash(new).await?);
    let keep = match keep_refresh_token {
        Some(token) => app
            .accounts
            .find_token(ctx.project_id, &latchkey_shared::crypto::hash_secret(token))
            .await?
            .filter(|t| t.session.user_id == user_id)
            .map(|t| t.session.id),
        None => None,
    };
    app.accounts
        .update_user(&row, Revoke::AllExcept(keep), &[])
        .await?;
    Ok(())
}

/// `POST /auth/password/set`: only for users without a password; ends no session.
pub async fn set(app: &App, ctx: &Context, password: &str) -> Result<()> {
    let user_id = ctx
        .user_id
        .ok_or_else(|| coded(ErrorCode::UserAuthenticationRequired, "Sign in first."))?;
    let (_, settings) = app.project(ctx.project_id).await?;
    require_credential(&settings)?;
    check_new(password, &settings)?;
    let mut row = app
        .accounts
        .user(ctx.project_id, user_id)
        .await?
        .ok_or_else(|| users::not_found_for(ctx, user_id))?;
    if row.password_hash.is_some() {
        return Err(coded(
            ErrorCode::PasswordAlreadySet,
            "The user already has a password.",
        ));
    }
    row.password_hash = Some(app.passwords.hash(password).await?);
    app.accounts.update_user(&row, Revoke::None, &[]).await?;
    Ok(())
}

/// `POST /auth/password/send-reset-code`: the same answer, in the same time, whether or not the
/// address exists. After the request is validated, the look-up and the mail happen in the
/// background, so the response time says nothing about the address (10 §1.4.5 has Stack's
/// 2–3 s delay for unknown addresses instead, which still leaves known ones faster or slower).
pub async fn send_reset_code(
    app: &Arc<App>,
    ctx: &Context,
    address: &str,
    callback_url: &str,
) -> Result<()> {
    if !email::is_valid(address) {
        return Err(Error::Invalid("email must be an e-mail address".into()));
    }
    let (project, settings) = app.project(ctx.project_id).await?;
    require_credential(&settings)?;
    require_trusted(callback_url, &settings)?;
    let (app, ctx, address, callback_url) = (
        app.clone(),
        ctx.clone(),
        address.to_owned(),
        callback_url.to_owned(),
    );
    tokio::spawn(async move {
        if let Err(e) = mail_reset_code(
            &app,
            &ctx,
            &project.display_name,
            &settings,
            &address,
            &callback_url,
        )
        .await
        {
            tracing::warn!(error = %e, "could not send a password-reset code");
        }
    });
    Ok(())
}

async fn mail_reset_code(
    app: &App,
    ctx: &Context,
    project_name: &str,
    settings: &Settings,
    address: &str,
    callback_url: &str,
) -> Result<()> {
    let Some(user_id) = auth_user(app, ctx, address).await? else {
        return Ok(());
    };
    let address = email::normalize(address);
    let data = json!({ "user_id": user_id, "email": address });
    let ttl = i64::from(settings.password_reset_code_lifetime_seconds) * 1000;
    let code = app
        .codes
        .create(ctx.project_id, RESET_KIND, &data, ttl)
        .await?;
    let variables = [
        ("email".to_owned(), address.clone()),
        ("link".to_owned(), codes::link(callback_url, &code)),
        ("project".to_owned(), project_name.to_owned()),
    ]
    .into_iter()
    .collect();
    let request = contacts::SendEmailRequest {
        to: address,
        template: "password_reset".into(),
        variables,
        mail: mail_override(settings),
    };
    app.contacts()
        .send_email(app.to_service(ctx, request))
        .await?;
    Ok(())
}

fn reset_user(code: &codes::Code) -> Result<Uuid> {
    code.data["user_id"]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| Error::Invalid("malformed reset code".into()))
}

/// `POST /auth/password/reset/check-code`: validates without consuming.
pub async fn check_reset_code(app: &App, ctx: &Context, code: &str) -> Result<()> {
    app.codes.check(ctx.project_id, RESET_KIND, code).await?;
    Ok(())
}

/// `POST /auth/password/reset`: password rules before the code is consumed; all sessions end;
/// emits `user.updated`.
pub async fn reset(app: &App, ctx: &Context, code: &str, password: &str) -> Result<()> {
    if password_len(password) > MAX_LEN {
        return Err(Error::Invalid(
            "password must be at most 70 characters".into(),
        ));
    }
    let found = app.codes.check(ctx.project_id, RESET_KIND, code).await?;
    let (_, settings) = app.project(ctx.project_id).await?;
    require_credential(&settings)?;
    check_new(password, &settings)?;
    let user_id = reset_user(&found)?;
    let mut row = app
        .accounts
        .user(ctx.project_id, user_id)
        .await?
        .ok_or_else(|| users::not_found(user_id))?;
    app.codes.consume(ctx.project_id, &found).await?;
    row.password_hash = Some(app.passwords.hash(password).await?);
    let channels = users::channels_of(app, ctx, &[user_id]).await?;
    let oauth = users::oauth_of(app, ctx, &[user_id]).await?;
    let user = users::view(
        &row,
        users::of(&channels, &user_id),
        users::of(&oauth, &user_id),
        &settings,
    );
    let event =
        latchkey_shared::events::Event::new("user.updated", ctx.project_id, app.now(), user);
    app.accounts
        .update_user(&row, Revoke::All, &[event])
        .await?;
    Ok(())
}
