//! Session revocation at the gateway (80 §6): auth announces ended sessions and deleted users
//! on the event bus; every gateway keeps them in memory until the affected access tokens would
//! have expired anyway, so checking costs a map look-up and no network round trip.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latchkey_shared::events::{SharedBus, SESSIONS_REVOKED};
use uuid::Uuid;

/// Access tokens live at most this long (70 §1), so older revocations can be forgotten.
const TOKEN_LIFETIME: Duration = Duration::from_secs(600 + 60);

#[derive(Default)]
struct Revoked {
    sessions: HashMap<Uuid, Instant>,
    /// Deleted users, with the time (seconds) of the deletion.
    users: HashMap<Uuid, (i64, Instant)>,
}

#[derive(Clone, Default)]
pub struct Revocations {
    inner: Arc<Mutex<Revoked>>,
}

impl Revocations {
    /// Whether a token of `session` for `user`, issued at `issued_at` (seconds), was revoked.
    pub fn is_revoked(&self, user: Uuid, session: Option<Uuid>, issued_at: i64) -> bool {
        let Ok(r) = self.inner.lock() else {
            return false;
        };
        session.is_some_and(|s| r.sessions.contains_key(&s))
            || r.users.get(&user).is_some_and(|(at, _)| issued_at <= *at)
    }

    /// Records sessions this gateway ended itself, ahead of their event.
    pub fn sessions_ended(&self, sessions: impl IntoIterator<Item = Uuid>) {
        let ids: Vec<Uuid> = sessions.into_iter().collect();
        if !ids.is_empty() {
            let data = serde_json::json!({ "session_ids": ids });
            self.record(SESSIONS_REVOKED, &data, 0);
        }
    }

    /// Records a deletion this gateway made itself, ahead of its event.
    pub fn user_deleted(&self, user: Uuid) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let data = serde_json::json!({ "id": user });
        self.record(
            "user.deleted",
            &data,
            i64::try_from(now).unwrap_or(i64::MAX),
        );
    }

    fn record(&self, event_type: &str, data: &serde_json::Value, at_secs: i64) {
        let Ok(mut r) = self.inner.lock() else { return };
        let now = Instant::now();
        r.sessions
            .retain(|_, t| now.duration_since(*t) < TOKEN_LIFETIME);
        r.users
            .retain(|_, (_, t)| now.duration_since(*t) < TOKEN_LIFETIME);
        let uuid = |v: &serde_json::Value| v.as_str().and_then(|s| Uuid::parse_str(s).ok());
        if event_type == SESSIONS_REVOKED {
            for id in data["session_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(uuid)
            {
                r.sessions.insert(id, now);
            }
        } else if let Some(user) = uuid(&data["id"]) {
            r.users.insert(user, (at_secs, now));
        }
    }

    /// Follows the bus until it closes; reconnection is the bus adapter's job.
    pub fn follow(&self, bus: SharedBus) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut deliveries = loop {
                match bus
                    .subscribe_transient(&[SESSIONS_REVOKED, "user.deleted"])
                    .await
                {
                    Ok(d) => break d,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot follow revocations yet; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            };
            while let Some(delivery) = deliveries.recv().await {
                let e = &delivery.event;
                this.record(&e.event_type, &e.data, e.created_at_millis / 1000);
                delivery.settle.ack().await;
            }
        });
    }
}
