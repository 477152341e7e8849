//! Which user a provider account belongs to (10 §4.2 steps 4–6): linking it to a signed-in
//! user, signing in its owner, merging by e-mail per the project's strategy, or creating a user.

use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use serde_json::json;
use uuid::Uuid;

use super::provider::{Grant, Identity};
use crate::app::App;
use crate::domain::anonymous;
use crate::domain::mail::auth_channel;
use crate::domain::settings::{MergeStrategy, OAuthProvider, Settings};
use crate::domain::users;
use crate::error::{coded, Error, Result};
use crate::store::oauth::OAuthAccount;

/// The provider tokens to keep on the record, for connected accounts (10 §6).
pub struct ProviderTokens {
    access_token: String,
    refresh_token: Option<String>,
    expires_at_millis: Option<i64>,
    scopes: String,
}

impl ProviderTokens {
    pub fn from_grant(grant: &Grant, scopes: &str, now: i64) -> Self {
        Self {
            access_token: grant.access_token.clone(),
            refresh_token: grant.refresh_token.clone(),
            expires_at_millis: grant.expires_in_secs.map(|s| now.saturating_add(s * 1000)),
            scopes: scopes.trim().to_owned(),
        }
    }

    pub fn apply(self, record: &mut OAuthAccount) {
        record.access_token = Some(self.access_token);
        // Providers often return a refresh token only the first time; keep the old one then.
        if self.refresh_token.is_some() {
            record.refresh_token = self.refresh_token;
        }
        record.access_token_expires_at_millis = self.expires_at_millis;
        record.scopes = self.scopes;
    }
}

/// A new record of `identity` on `user_id`.
pub fn new_record(
    app: &App,
    ctx: &Context,
    p: &OAuthProvider,
    identity: &Identity,
    user_id: Uuid,
    allow_sign_in: bool,
) -> OAuthAccount {
    OAuthAccount {
        project_id: ctx.project_id,
        id: Uuid::now_v7(),
        user_id,
        provider_id: p.id.clone(),
        provider_type: p.provider_type.clone(),
        account_id: identity.account_id.clone(),
        email: identity.email.clone(),
        allow_sign_in,
        allow_connected_accounts: true,
        access_token: None,
        refresh_token: None,
        access_token_expires_at_millis: None,
        scopes: String::new(),
        created_at_millis: app.now(),
    }
}

async fn save(
    app: &App,
    mut record: OAuthAccount,
    tokens: ProviderTokens,
    is_new: bool,
) -> Result<()> {
    tokens.apply(&mut record);
    if is_new {
        app.oauth.insert(&record).await?;
    } else {
        app.oauth.update(&record).await?;
    }
    Ok(())
}

/// The `link` flow: attaches the account to the signed-in user.
pub async fn link(
    app: &App,
    ctx: &Context,
    p: &OAuthProvider,
    identity: &Identity,
    tokens: ProviderTokens,
    user_id: Uuid,
) -> Result<Uuid> {
    let records = app
        .oauth
        .of_account(ctx.project_id, &p.id, &identity.account_id)
        .await?;
    if records.iter().any(|r| r.user_id != user_id) {
        return Err(coded(
            ErrorCode::OauthConnectionAlreadyConnectedToAnotherUser,
            "This provider account is already connected to another user.",
        ));
    }
    if let Some(record) = records.into_iter().next() {
        save(app, record, tokens, false).await?;
        return Ok(user_id);
    }
    let own = app.oauth.of_user(ctx.project_id, user_id).await?;
    let sign_in_taken = own.iter().any(|r| r.provider_id == p.id && r.allow_sign_in);
    let record = new_record(
        app,
        ctx,
        p,
        identity,
        user_id,
        p.allow_sign_in && !sign_in_taken,
    );
    save(app, record, tokens, true).await?;
    Ok(user_id)
}

fn used_by_someone_else(would_work_if_verified: bool) -> Error {
    coded(
        ErrorCode::ContactChannelAlreadyUsedForAuthBySomeoneElse,
        "This e-mail address is already used for sign-in by another user.",
    )
    .with_details(json!({ "would_work_if_email_was_verified": would_work_if_verified }))
}

/// The `authenticate` flow: the user the account signs in, and whether it was created now. A
/// new account made while `upgrade` (the flow's signed-in user) is anonymous upgrades that user.
pub async fn authenticate(
    app: &App,
    ctx: &Context,
    settings: &Settings,
    p: &OAuthProvider,
    identity: &Identity,
    tokens: ProviderTokens,
    upgrade: Option<Uuid>,
) -> Result<(Uuid, bool)> {
    let records = app
        .oauth
        .of_account(ctx.project_id, &p.id, &identity.account_id)
        .await?;
    if let Some(record) = records.into_iter().find(|r| r.allow_sign_in) {
        let user_id = record.user_id;
        save(app, record, tokens, false).await?;
        return Ok((user_id, false));
    }
    let mut email_for_auth = true;
    if let Some(address) = &identity.email {
        if let Some(channel) = auth_channel(app, ctx, address).await? {
            match settings.oauth_account_merge_strategy {
                MergeStrategy::LinkMethod if channel.is_verified && identity.email_verified => {
                    let owner = Uuid::parse_str(&channel.user_id)
                        .map_err(|_| Error::Invalid("malformed channel owner".into()))?;
                    let record = new_record(app, ctx, p, identity, owner, true);
                    save(app, record, tokens, true).await?;
                    return Ok((owner, false));
                }
                MergeStrategy::LinkMethod => {
                    return Err(used_by_someone_else(!channel.is_verified))
                }
                MergeStrategy::RaiseError => return Err(used_by_someone_else(false)),
                MergeStrategy::AllowDuplicates => email_for_auth = false,
            }
        }
    }
    if !settings.sign_up_enabled {
        return Err(coded(
            ErrorCode::SignUpNotEnabled,
            "Sign-up is not enabled for this project.",
        ));
    }
    let anonymous = match upgrade {
        Some(id) => anonymous::still_anonymous(app, ctx.project_id, id).await?,
        None => None,
    };
    let upgrading = anonymous.is_some();
    let mut row = anonymous.unwrap_or_else(|| users::new_row(ctx.project_id, app.now()));
    let user_id = row.id;
    if row.display_name.is_none() {
        row.display_name = identity.display_name.clone();
    }
    if row.profile_image_url.is_none() {
        row.profile_image_url = identity.profile_image_url.clone();
    }
    let channel = match &identity.email {
        Some(address) => Some(
            users::reserve_email(
                app,
                ctx,
                user_id,
                address,
                identity.email_verified,
                email_for_auth,
            )
            .await
            .map_err(|e| anonymous::reservation_refused(upgrading, e))?,
        ),
        None => None,
    };
    if upgrading {
        anonymous::upgrade(app, ctx, row, settings, channel).await?;
    } else {
        users::finish_create(app, ctx, row, settings, channel, None).await?;
    }
    let record = new_record(app, ctx, p, identity, user_id, true);
    save(app, record, tokens, true).await?;
    Ok((user_id, true))
}
