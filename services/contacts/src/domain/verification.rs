//! E-mail verification codes (40 §3).

use std::collections::HashMap;

use latchkey_shared::codes::{self, Codes};
use serde_json::json;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::mail::{Letter, Mailer};
use crate::store::Store;

pub const KIND: &str = "CONTACT_CHANNEL_VERIFICATION";
const LIFETIME_MILLIS: i64 = 7 * 24 * 60 * 60 * 1000;

pub struct Send<'a> {
    pub user_id: Uuid,
    pub email: &'a str,
    pub callback_url: &'a str,
    pub project_name: &'a str,
    pub smtp: Option<(String, String)>,
}

/// Issues a code for the user's unverified channel with this address and mails the link.
pub async fn send(
    store: &Store,
    codes: &Codes,
    mailer: &Mailer,
    project: Uuid,
    req: Send<'_>,
    now: i64,
) -> Result<()> {
    let address = latchkey_shared::email::normalize(req.email);
    let channels = store.channels_of(project, &[req.user_id]).await?;
    let channel = channels
        .iter()
        .find(|c| c.value == address)
        .ok_or(Error::ChannelNotFound)?;
    if channel.is_verified {
        return Err(Error::AlreadyVerified);
    }
    let data = json!({ "user_id": req.user_id, "email": address });
    let code = codes.create(project, KIND, &data, LIFETIME_MILLIS).await?;
    let vars: HashMap<String, String> = [
        ("email", address.clone()),
        ("link", codes::link(req.callback_url, &code)),
        ("project", req.project_name.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    mailer
        .send(Letter {
            project,
            to: &address,
            template: "email_verification",
            vars: &vars,
            smtp: req.smtp,
            now,
        })
        .await?;
    Ok(())
}

/// `POST /contact-channels/verify`: consumes the code and verifies the user's channel with the
/// code's address (found by user and address, 40 §3.3).
pub async fn verify(store: &Store, codes: &Codes, project: Uuid, code: &str) -> Result<()> {
    let found = codes.check(project, KIND, code).await?;
    codes.consume(project, &found).await?;
    let user = found.data["user_id"]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok());
    let address = found.data["email"].as_str().unwrap_or_default();
    let Some(user) = user else {
        return Err(Error::ChannelNotFound);
    };
    let channels = store.channels_of(project, &[user]).await?;
    let mut channel = channels
        .into_iter()
        .find(|c| c.value == address)
        .ok_or(Error::ChannelNotFound)?;
    channel.is_verified = true;
    store.update(&channel).await?;
    Ok(())
}

/// `POST /contact-channels/verify/check-code`: validates without consuming.
pub async fn check(codes: &Codes, project: Uuid, code: &str) -> Result<()> {
    codes.check(project, KIND, code).await?;
    Ok(())
}
