//! Sign-in by e-mailed one-time code or magic link (10 §2). One code of kind `OTP_SIGN_IN`
//! serves both: the link carries all 45 characters; the mail shows the first six in upper case
//! and the response returns the other 39 as the nonce the client sends back with them.

use std::collections::HashMap;
use std::sync::Arc;

use latchkey_proto::contacts::v1 as contacts;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::{codes, email};
use serde_json::json;
use uuid::Uuid;

use super::anonymous;
use super::mail::{auth_channel, mail_override, require_trusted};
use super::mfa::{self, SignedIn};
use super::settings::Settings;
use super::users;
use crate::app::App;
use crate::error::{coded, Error, Result};

pub const KIND: &str = "OTP_SIGN_IN";
const OTP_LEN: usize = 6;

fn require_enabled(settings: &Settings) -> Result<()> {
    if settings.magic_link_enabled {
        Ok(())
    } else {
        Err(coded(
            ErrorCode::OtpSignInNotEnabled,
            "Sign-in by one-time code is not enabled for this project.",
        ))
    }
}

/// Who an address signs in as (10 §2.3 step 1): an existing user whose auth channel is
/// verified, or nobody yet when sign-up is open.
async fn account_for(
    app: &App,
    ctx: &Context,
    settings: &Settings,
    address: &str,
) -> Result<Option<Uuid>> {
    match auth_channel(app, ctx, address).await? {
        Some(channel) if channel.is_verified => Ok(Uuid::parse_str(&channel.user_id).ok()),
        Some(_) => Err(coded(
            ErrorCode::UserEmailAlreadyExists,
            "A user with this e-mail address already exists.",
        )
        .with_details(json!({ "email": address, "would_work_if_email_was_verified": true }))),
        None if settings.sign_up_enabled => Ok(None),
        None => Err(coded(
            ErrorCode::SignUpNotEnabled,
            "Sign-up is not enabled for this project.",
        )),
    }
}

/// `POST /auth/otp/send-sign-in-code`: returns the nonce. The answer and its time are the same
/// whatever the address (no account enumeration; issue 11 over 10 §2.2's 409 and 400 here):
/// the code carries only the address, and the account look-up and the mail happen in the
/// background. Step 1's refusals still hold, since sign-in re-evaluates them, so they reach
/// only someone who received the code, i.e. holds the mailbox.
pub async fn send_code(
    app: &Arc<App>,
    ctx: &Context,
    address: &str,
    callback_url: &str,
) -> Result<String> {
    if !email::is_strict(address) {
        return Err(Error::Invalid(
            "email must be a valid e-mail address".into(),
        ));
    }
    let (project, settings) = app.project(ctx.project_id).await?;
    require_enabled(&settings)?;
    require_trusted(callback_url, &settings)?;
    let address = email::normalize(address);
    let ttl = i64::from(settings.otp_code_lifetime_seconds) * 1000;
    let code = app
        .codes
        .create(ctx.project_id, KIND, &json!({ "email": address }), ttl)
        .await?;
    let variables: HashMap<String, String> = [
        ("email", address.clone()),
        ("otp", code[..OTP_LEN].to_uppercase()),
        ("link", codes::link(callback_url, &code)),
        ("project", project.display_name.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let request = contacts::SendEmailRequest {
        to: address.clone(),
        template: "otp_sign_in".into(),
        variables,
        mail: mail_override(&settings),
    };
    let (app, ctx) = (app.clone(), ctx.clone());
    tokio::spawn(async move {
        let prepared = match account_for(&app, &ctx, &settings, &address).await {
            Ok(Some(user_id)) => enable_otp(&app, ctx.project_id, user_id).await,
            Ok(None) => Ok(()),
            Err(Error::Coded(c))
                if matches!(
                    c.code,
                    ErrorCode::UserEmailAlreadyExists | ErrorCode::SignUpNotEnabled
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        };
        if let Err(e) = prepared {
            tracing::warn!(error = %e, "could not prepare a sign-in code's account");
            return;
        }
        let request = app.to_service(&ctx, request);
        if let Err(e) = app.contacts().send_email(request).await {
            tracing::warn!(error = %e, "could not send a sign-in code");
        }
    });
    Ok(code[OTP_LEN..].to_owned())
}

/// A user who signs in by code has an OTP method from then on (10 §2.3 step 1).
async fn enable_otp(app: &App, project: Uuid, user_id: Uuid) -> Result<()> {
    if let Some(mut row) = app.accounts.user(project, user_id).await? {
        if !row.otp_auth_enabled {
            row.otp_auth_enabled = true;
            app.accounts
                .update_user(&row, crate::store::accounts::Revoke::None, &[])
                .await?;
        }
    }
    Ok(())
}

/// `POST /auth/otp/sign-in/check-code`: validates without consuming.
pub async fn check_code(app: &App, ctx: &Context, code: &str) -> Result<()> {
    let (_, settings) = app.project(ctx.project_id).await?;
    require_enabled(&settings)?;
    app.codes.check(ctx.project_id, KIND, code).await?;
    Ok(())
}

/// `POST /auth/otp/sign-in`: the existing user, or a new one with a verified primary address.
pub async fn sign_in(app: &App, ctx: &Context, code: &str) -> Result<SignedIn> {
    let (_, settings) = app.project(ctx.project_id).await?;
    require_enabled(&settings)?;
    let found = app.codes.check(ctx.project_id, KIND, code).await?;
    let address = found.data["email"]
        .as_str()
        .ok_or_else(|| Error::Invalid("malformed sign-in code".into()))?
        .to_owned();
    let existing = account_for(app, ctx, &settings, &address).await?;
    app.codes.consume(ctx.project_id, &found).await?;
    let (user_id, is_new_user) = match existing {
        Some(id) => {
            enable_otp(app, ctx.project_id, id).await?;
            (id, false)
        }
        None => (create_user(app, ctx, &settings, &address).await?, true),
    };
    mfa::sign_in(app, ctx, user_id, is_new_user).await
}

/// A new user for the address, or the caller's anonymous user upgraded to it.
async fn create_user(app: &App, ctx: &Context, settings: &Settings, address: &str) -> Result<Uuid> {
    let anonymous = anonymous::caller(app, ctx).await?;
    let upgrading = anonymous.is_some();
    let mut row = anonymous.unwrap_or_else(|| users::new_row(ctx.project_id, app.now()));
    let user_id = row.id;
    row.otp_auth_enabled = true;
    let channel = users::reserve_email(app, ctx, user_id, address, true, true)
        .await
        .map_err(|e| anonymous::reservation_refused(upgrading, e))?;
    if upgrading {
        anonymous::upgrade(app, ctx, row, settings, Some(channel)).await?;
    } else {
        users::finish_create(app, ctx, row, settings, Some(channel), None).await?;
    }
    Ok(user_id)
}
