//! Contact channels (40) and the primary e-mail rules (20 §1.4).

use latchkey_shared::email;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::{Channel, Store, StoreError};

/// A channel to create, with the id chosen by the caller.
#[derive(Debug, Clone)]
pub struct NewChannel {
    pub id: Uuid,
    pub user_id: Uuid,
    pub value: String,
    pub used_for_auth: bool,
    pub is_verified: bool,
    pub is_primary: bool,
}

fn normalized_address(value: &str) -> Result<String> {
    if !email::is_valid(value) {
        return Err(Error::Invalid(format!(
            "not a valid e-mail address: {value}"
        )));
    }
    Ok(email::normalize(value))
}

/// Refuses an auth-enabled address that signs in another user.
async fn ensure_auth_free(store: &Store, project: Uuid, user: Uuid, value: &str) -> Result<()> {
    match store.auth_channel(project, value).await? {
        Some(other) if other.user_id != user => Err(Error::UsedForAuthBySomeoneElse {
            value: value.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Maps a unique-index refusal (a concurrent writer won) to the rule it enforces.
async fn explain_conflict(store: &Store, project: Uuid, c: &Channel, e: StoreError) -> Error {
    match e {
        StoreError::Conflict => {
            if c.used_for_auth
                && ensure_auth_free(store, project, c.user_id, &c.value)
                    .await
                    .is_err()
            {
                Error::UsedForAuthBySomeoneElse {
                    value: c.value.clone(),
                }
            } else {
                Error::AlreadyExists
            }
        }
        other => other.into(),
    }
}

pub async fn create(store: &Store, project: Uuid, new: NewChannel, now: i64) -> Result<Channel> {
    let value = normalized_address(&new.value)?;
    if let Some(existing) = store.channel(project, new.id).await? {
        // A retried call with the same id gets the same channel back.
        if existing.user_id == new.user_id && existing.value == value {
            return Ok(existing);
        }
        return Err(Error::AlreadyExists);
    }
    let channels = store.channels_of(project, &[new.user_id]).await?;
    if channels.iter().any(|c| c.value == value) {
        return Err(Error::AlreadyExists);
    }
    if new.used_for_auth {
        ensure_auth_free(store, project, new.user_id, &value).await?;
    }
    let channel = Channel {
        project_id: project,
        id: new.id,
        user_id: new.user_id,
        value,
        used_for_auth: new.used_for_auth,
        is_verified: new.is_verified,
        is_primary: new.is_primary,
        created_at_millis: now,
    };
    match store.insert(&channel).await {
        Ok(()) => Ok(channel),
        Err(e) => Err(explain_conflict(store, project, &channel, e).await),
    }
}

/// The spellings a sign-in looks `address` up by: as given, then normalised (00 §1).
fn spellings(address: &str) -> Vec<String> {
    let normalized = email::normalize(address);
    if normalized == address {
        vec![normalized]
    } else {
        vec![address.to_owned(), normalized]
    }
}

/// The channel signing in with `address`, by the first of its spellings that has one.
pub async fn find_auth(store: &Store, project: Uuid, address: &str) -> Result<Option<Channel>> {
    for value in spellings(address) {
        if let Some(c) = store.auth_channel(project, &value).await? {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// [`find_auth`] with all of the owner's channels, each spelling one statement.
pub async fn find_auth_with_owner(
    store: &Store,
    project: Uuid,
    address: &str,
) -> Result<Option<(Channel, Vec<Channel>)>> {
    for value in spellings(address) {
        let owned = store.auth_owner_channels(project, &value).await?;
        let found = owned.iter().find(|c| c.used_for_auth && c.value == value);
        if let Some(channel) = found.cloned() {
            return Ok(Some((channel, owned)));
        }
    }
    Ok(None)
}

/// What a user update asks of the primary e-mail.
#[derive(Debug, Clone, Default)]
pub struct PrimaryChange {
    pub email: Option<String>,
    pub clear: bool,
    pub verified: Option<bool>,
    pub auth_enabled: Option<bool>,
    pub new_channel_id: Uuid,
}

/// Applies 20 §1.4 and returns the user's channels afterwards.
pub async fn set_primary(
    store: &Store,
    project: Uuid,
    user: Uuid,
    change: PrimaryChange,
    now: i64,
) -> Result<Vec<Channel>> {
    let channels = store.channels_of(project, &[user]).await?;
    let primary = channels.iter().find(|c| c.is_primary).cloned();
    if change.clear {
        if let Some(mut p) = primary {
            p.is_primary = false;
            store.update(&p).await?;
        }
        if change.verified == Some(true) || change.auth_enabled == Some(true) {
            return Err(Error::BadRequest(
                "an e-mail is required to verify or enable it for sign-in".into(),
            ));
        }
        return Ok(store.channels_of(project, &[user]).await?);
    }
    let target = match change.email.as_deref() {
        None => match primary {
            Some(p) => p,
            None if change.verified == Some(true) || change.auth_enabled == Some(true) => {
                return Err(Error::BadRequest(
                    "an e-mail is required to verify or enable it for sign-in".into(),
                ))
            }
            None => return Ok(channels),
        },
        Some(address) => {
            let value = normalized_address(address)?;
            match channels.iter().find(|c| c.value == value) {
                Some(existing) => {
                    let mut c = existing.clone();
                    c.is_primary = true;
                    c
                }
                None => {
                    let auth = change
                        .auth_enabled
                        .unwrap_or_else(|| primary.as_ref().is_some_and(|p| p.used_for_auth));
                    if auth {
                        ensure_auth_free(store, project, user, &value).await?;
                    }
                    let fresh = Channel {
                        project_id: project,
                        id: change.new_channel_id,
                        user_id: user,
                        value,
                        used_for_auth: auth,
                        is_verified: change.verified.unwrap_or(false),
                        is_primary: true,
                        created_at_millis: now,
                    };
                    return match store.insert(&fresh).await {
                        Ok(()) => Ok(store.channels_of(project, &[user]).await?),
                        Err(e) => Err(explain_conflict(store, project, &fresh, e).await),
                    };
                }
            }
        }
    };
    let mut updated = target;
    if let Some(v) = change.verified {
        updated.is_verified = v;
    }
    if let Some(a) = change.auth_enabled {
        if a && !updated.used_for_auth {
            ensure_auth_free(store, project, user, &updated.value).await?;
        }
        updated.used_for_auth = a;
    }
    if let Err(e) = store.update(&updated).await {
        return Err(explain_conflict(store, project, &updated, e).await);
    }
    Ok(store.channels_of(project, &[user]).await?)
}

/// One user's channel; `CONTACT_CHANNEL_NOT_FOUND` when it belongs to someone else.
pub async fn get(store: &Store, project: Uuid, user: Uuid, id: Uuid) -> Result<Channel> {
    match store.channel(project, id).await? {
        Some(c) if c.user_id == user => Ok(c),
        _ => Err(Error::ChannelNotFound),
    }
}

/// What a PATCH of a channel may change (40 §1).
#[derive(Debug, Clone, Default)]
pub struct ChannelChange {
    pub value: Option<String>,
    pub used_for_auth: Option<bool>,
    pub is_verified: Option<bool>,
    pub is_primary: Option<bool>,
}

/// Applies 40 §4: a new value resets verification unless it is given; becoming primary demotes
/// the previous primary; enabling sign-in needs an address nobody else signs in with.
pub async fn update(
    store: &Store,
    project: Uuid,
    user: Uuid,
    id: Uuid,
    change: ChannelChange,
) -> Result<Channel> {
    let mut c = get(store, project, user, id).await?;
    if let Some(value) = &change.value {
        let value = normalized_address(value)?;
        if value != c.value {
            let others = store.channels_of(project, &[user]).await?;
            if others.iter().any(|o| o.id != id && o.value == value) {
                return Err(Error::AlreadyExists);
            }
            c.value = value;
            c.is_verified = false;
        }
    }
    if let Some(v) = change.is_verified {
        c.is_verified = v;
    }
    if let Some(p) = change.is_primary {
        c.is_primary = p;
    }
    if let Some(a) = change.used_for_auth {
        c.used_for_auth = a;
    }
    if c.used_for_auth {
        ensure_auth_free(store, project, user, &c.value).await?;
    }
    if let Err(e) = store.update(&c).await {
        return Err(explain_conflict(store, project, &c, e).await);
    }
    Ok(c)
}

pub async fn delete(store: &Store, project: Uuid, user: Uuid, id: Uuid) -> Result<()> {
    get(store, project, user, id).await?;
    store.delete(project, id).await?;
    Ok(())
}
