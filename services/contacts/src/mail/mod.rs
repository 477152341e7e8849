//! Outgoing mail: SMTP through lettre when a URL is configured (deployment-wide, or per project),
//! otherwise the dev mailbox, where messages are stored with their bodies and logged.

pub mod templates;

use std::collections::HashMap;

use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use uuid::Uuid;

use crate::store::{Email, Store};

/// Deployment mail settings.
#[derive(Debug, Clone, Default)]
pub struct MailConfig {
    /// `smtp://host:port`, `smtps://user:pass@host:465`; `None` selects the dev mailbox.
    pub smtp_url: Option<String>,
    pub from: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("unknown template {0}")]
    UnknownTemplate(String),
    #[error("bad address: {0}")]
    Address(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

pub struct Mailer {
    config: MailConfig,
    store: Store,
}

impl Mailer {
    pub fn new(config: MailConfig, store: Store) -> Self {
        Self { config, store }
    }

    /// Records and sends one message. SMTP delivery happens in the background so callers never
    /// wait on a mail server; its outcome is recorded on the message.
    pub async fn send(
        &self,
        project: Uuid,
        to: &str,
        template: &str,
        vars: &HashMap<String, String>,
        project_override: Option<(String, String)>,
        now: i64,
    ) -> Result<Uuid, MailError> {
        let rendered = templates::render(template, vars)
            .ok_or_else(|| MailError::UnknownTemplate(template.to_owned()))?;
        let (smtp_url, from) = match project_override {
            Some((url, from)) => (Some(url), from),
            None => (self.config.smtp_url.clone(), self.config.from.clone()),
        };
        let id = Uuid::now_v7();
        let dev = smtp_url.is_none();
        let email = Email {
            project_id: project,
            id,
            recipient: to.to_owned(),
            subject: rendered.subject.clone(),
            template: template.to_owned(),
            status: if dev { "sent" } else { "queued" }.to_owned(),
            error: None,
            text_body: dev.then(|| rendered.text.clone()),
            html_body: dev.then(|| rendered.html.clone()),
            created_at_millis: now,
        };
        let message = build(&from, to, &rendered)?;
        self.store.insert_email(&email).await?;
        match smtp_url {
            None => {
                tracing::info!(to, subject = %rendered.subject, body = %rendered.text, "dev mailbox");
            }
            Some(url) => {
                let store = self.store.clone();
                tokio::spawn(async move {
                    let outcome = deliver(&url, message).await;
                    let (status, error) = match &outcome {
                        Ok(()) => ("sent", None),
                        Err(e) => {
                            tracing::warn!(error = %e, "mail delivery failed");
                            ("failed", Some(e.as_str()))
                        }
                    };
                    if let Err(e) = store.set_email_status(project, id, status, error).await {
                        tracing::error!(error = %e, "could not record mail status");
                    }
                });
            }
        }
        Ok(id)
    }
}

fn build(from: &str, to: &str, r: &templates::Rendered) -> Result<Message, MailError> {
    let from: Mailbox = from
        .parse()
        .map_err(|_| MailError::Address(from.to_owned()))?;
    let to: Mailbox = to.parse().map_err(|_| MailError::Address(to.to_owned()))?;
    Message::builder()
        .from(from)
        .to(to)
        .subject(&r.subject)
        .multipart(MultiPart::alternative_plain_html(
            r.text.clone(),
            r.html.clone(),
        ))
        .map_err(|e| MailError::Address(e.to_string()))
}

async fn deliver(url: &str, message: Message) -> Result<(), String> {
    let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
        .map_err(|e| e.to_string())?
        .timeout(Some(std::time::Duration::from_secs(15)))
        .build();
    transport
        .send(message)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}
