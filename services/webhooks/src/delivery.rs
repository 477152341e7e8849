//! The delivery worker: picks due deliveries, signs and POSTs them, records every attempt and
//! schedules the next one (60 §3.3). Several workers (replicas) share the table safely: a
//! delivery is claimed by moving its next attempt past a lease before it is sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_shared::clock::SharedClock;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::signing;
use crate::store::{Attempt, Delivery, Store, FAILED, SUCCEEDED};
use crate::url_policy::{self, UrlPolicy};

/// A receiver has this long to answer (60 §3.3).
const TIMEOUT: Duration = Duration::from_secs(15);
/// A claimed delivery comes back to the queue after this if its worker died mid-attempt.
const LEASE_MILLIS: i64 = 60_000;
const BATCH: i64 = 64;
const POLL: Duration = Duration::from_millis(250);

/// Waits after each failed attempt; attempts = waits + 1 (60 §3.3).
pub const DEFAULT_SCHEDULE_SECONDS: [f64; 7] =
    [5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0];

/// Parses `LATCHKEY_WEBHOOK_RETRY_SCHEDULE`: seconds, comma-separated, fractions allowed.
pub fn parse_schedule(text: &str) -> Result<Vec<Duration>, String> {
    text.split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("not a number of seconds: {s:?}"))
        })
        .collect()
}

pub fn default_schedule() -> Vec<Duration> {
    DEFAULT_SCHEDULE_SECONDS
        .iter()
        .map(|s| Duration::from_secs_f64(*s))
        .collect()
}

pub struct Worker {
    pub store: Store,
    pub policy: UrlPolicy,
    pub schedule: Vec<Duration>,
    pub clock: SharedClock,
    /// Rung when new deliveries are enqueued, so local ones go out without waiting a poll.
    pub wake: Arc<Notify>,
    http: reqwest::Client,
}

impl Worker {
    pub fn new(
        store: Store,
        policy: UrlPolicy,
        schedule: Vec<Duration>,
        clock: SharedClock,
        wake: Arc<Notify>,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(url_policy::resolver(policy))
            // A proxy would resolve the receiver's name itself, past the resolver's checks.
            .no_proxy()
            .user_agent("Latchkey-Webhooks")
            .build()?;
        Ok(Self {
            store,
            policy,
            schedule,
            clock,
            wake,
            http,
        })
    }

    /// Delivers until `shutdown` resolves; attempts in flight finish first.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut inflight = JoinSet::new();
        loop {
            match self.store.due(self.clock.now_millis(), BATCH).await {
                Ok(due) => {
                    for d in due {
                        let worker = self.clone();
                        inflight.spawn(async move { worker.attempt(d).await });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read due webhook deliveries"),
            }
            while inflight.try_join_next().is_some() {}
            tokio::select! {
                _ = &mut shutdown => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
        while inflight.join_next().await.is_some() {}
    }

    async fn attempt(&self, mut d: Delivery) {
        let now = self.clock.now_millis();
        let lease_until = now + LEASE_MILLIS;
        match self.store.claim(&d, lease_until).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not claim a webhook delivery");
                return;
            }
        }
        let started = Instant::now();
        let outcome = self.send(&d, now).await;
        let attempt = Attempt {
            at_millis: now,
            response_status: outcome.as_ref().ok().map(|s| i32::from(*s)),
            error: match &outcome {
                Ok(s) if (200..300).contains(s) => None,
                Ok(s) => Some(format!("the receiver answered {s}")),
                Err(e) => Some(e.clone()),
            },
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        };
        d.attempt_count += 1;
        // The n-th failure waits schedule[n-1]; past the schedule's end the message has failed.
        let wait = usize::try_from(d.attempt_count - 1)
            .ok()
            .and_then(|i| self.schedule.get(i));
        let outcome = if attempt.error.is_none() {
            d.status = SUCCEEDED.into();
            d.next_attempt_at_millis = None;
            "delivered"
        } else if let Some(wait) = wait {
            d.next_attempt_at_millis = Some(self.clock.now_millis() + jittered(*wait));
            "failed"
        } else {
            d.status = FAILED.into();
            d.next_attempt_at_millis = None;
            "gave_up"
        };
        latchkey_shared::metrics::WEBHOOK_ATTEMPTS.add(
            latchkey_shared::metrics::labels(&[("outcome", outcome)]),
            1.0,
        );
        if let Err(e) = self.store.record(&d, &attempt, lease_until).await {
            tracing::error!(error = %e, message_id = %d.message_id, "could not record a webhook attempt");
        }
    }

    /// One POST; the receiver's status, or why there was none.
    async fn send(&self, d: &Delivery, now_millis: i64) -> Result<u16, String> {
        let endpoint = self
            .store
            .endpoint(d.project_id, d.endpoint_id)
            .await
            .map_err(|e| format!("storage: {e}"))?
            .ok_or("the endpoint was deleted")?;
        if !endpoint.enabled {
            return Err("the endpoint is disabled".into());
        }
        let message = self
            .store
            .message(d.project_id, &d.message_id)
            .await
            .map_err(|e| format!("storage: {e}"))?
            .ok_or("the message is gone")?;
        let url = self.policy.check_syntax(&endpoint.url)?;
        // Names are checked by the resolver at connect time; literal addresses never reach it.
        if let Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) = url.host() {
            let ip = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
            if let Ok(ip) = ip.parse() {
                self.policy.check_ip(ip)?;
            }
        }
        let mut secrets = vec![endpoint.secret.as_str()];
        if let (Some(old), Some(until)) = (
            &endpoint.previous_secret,
            endpoint.previous_secret_expires_at_millis,
        ) {
            if until > now_millis {
                secrets.push(old);
            }
        }
        let timestamp = now_millis / 1000;
        let signature = signing::signature(&secrets, &message.id, timestamp, &message.body);
        let timestamp = timestamp.to_string();
        let res = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &message.id)
            .header("webhook-timestamp", &timestamp)
            .header("webhook-signature", &signature)
            .header("svix-id", &message.id)
            .header("svix-timestamp", &timestamp)
            .header("svix-signature", &signature)
            .body(message.body.clone())
            .send()
            .await
            .map_err(|e| describe(&e))?;
        Ok(res.status().as_u16())
    }
}

/// Up to a tenth more, so receivers that failed together are not retried together.
fn jittered(wait: Duration) -> i64 {
    let base = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
    let spread = base / 10;
    if spread == 0 {
        return base;
    }
    base + (rand::random::<u64>() % spread as u64) as i64
}

fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    // The source chain says why (refused address, TLS, reset) without the body or headers.
    let mut why = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = s.to_string();
        source = s.source();
    }
    if why.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {why}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_schedules() {
        assert_eq!(
            parse_schedule("0.2, 1,5").ok(),
            Some(vec![
                Duration::from_millis(200),
                Duration::from_secs(1),
                Duration::from_secs(5)
            ])
        );
        assert!(parse_schedule("1,x").is_err());
        assert!(parse_schedule("-1").is_err());
        assert_eq!(default_schedule().len(), 7);
    }
}
