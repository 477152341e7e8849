//! What the e-mail based flows share: trusted callback URLs (50 §7), the project's own mail
//! settings, and finding the account an address signs in to.

use latchkey_proto::contacts::v1 as contacts;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::urls;
use uuid::Uuid;

use super::settings::Settings;
use crate::app::App;
use crate::error::{coded, Error, Result};

pub fn require_trusted(url: &str, settings: &Settings) -> Result<()> {
    let domains: Vec<String> = settings.domains.iter().map(|d| d.domain.clone()).collect();
    if url.contains(' ') || url::Url::parse(url).is_err() {
        return Err(Error::Invalid(
            "the URL must be absolute and contain no spaces".into(),
        ));
    }
    if urls::is_trusted(url, settings.allow_localhost, &domains) {
        Ok(())
    } else {
        Err(coded(
            ErrorCode::RedirectUrlNotWhitelisted,
            "The URL is not trusted by the project.",
        ))
    }
}

pub fn mail_override(settings: &Settings) -> Option<contacts::MailSettings> {
    settings.email.as_ref().map(|e| contacts::MailSettings {
        smtp_url: e.smtp_url.clone(),
        from: e.from.clone(),
    })
}

/// The auth-enabled channel with this address, if any.
pub async fn auth_channel(
    app: &App,
    ctx: &Context,
    address: &str,
) -> Result<Option<contacts::Channel>> {
    Ok(find(app, ctx, address, false).await?.channel)
}

async fn find(
    app: &App,
    ctx: &Context,
    address: &str,
    with_owner_channels: bool,
) -> Result<contacts::FindAuthChannelResponse> {
    let request = contacts::FindAuthChannelRequest {
        email: address.to_owned(),
        with_owner_channels,
    };
    Ok(app
        .contacts()
        .find_auth_channel(app.to_service(ctx, request))
        .await?
        .into_inner())
}

/// The user signing in with this address, if any, with all their channels (one contacts call,
/// so a password sign-in composes its token without asking again).
pub async fn auth_owner(
    app: &App,
    ctx: &Context,
    address: &str,
) -> Result<Option<(Uuid, Vec<contacts::Channel>)>> {
    let found = find(app, ctx, address, true).await?;
    Ok(found
        .channel
        .and_then(|c| Uuid::parse_str(&c.user_id).ok())
        .map(|user| (user, found.owner_channels)))
}

/// The user signing in with this address, if any.
pub async fn auth_user(app: &App, ctx: &Context, address: &str) -> Result<Option<Uuid>> {
    let channel = auth_channel(app, ctx, address).await?;
    Ok(channel.and_then(|c| Uuid::parse_str(&c.user_id).ok()))
}
