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

/// One message to send: a template filled with `vars`, through the project's own mail server
/// (`smtp`: URL and sender) or the deployment's.
pub struct Letter<'a> {
    pub project: Uuid,
    pub to: &'a str,
    pub template: &'a str,
    pub vars: &'a HashMap<String, String>,
    pub smtp: Option<(String, String)>,
    pub now: i64,
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
    pub async fn send(&self, letter: Letter<'_>) -> Result<Uuid, MailError> {
        let outgoing = self.record(letter).await?;
        let id = outgoing.id;
        if outgoing.smtp_url.is_some() {
            tokio::spawn(outgoing.deliver(self.store.clone()));
        }
        Ok(id)
    }

    /// Records and sends one message, waiting up to `wait` for the mail server: the outcome is
    /// the server's refusal, or why it could not be reached. A delivery still under way when
    /// the wait ends goes on, and records its outcome on the message.
    pub async fn send_and_wait(
        &self,
        letter: Letter<'_>,
        wait: std::time::Duration,
    ) -> Result<Result<(), String>, MailError> {
        let outgoing = self.record(letter).await?;
        let delivery = tokio::spawn(outgoing.deliver(self.store.clone()));
        Ok(match tokio::time::timeout(wait, delivery).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => Err(format!("the delivery failed: {e}")),
            Err(_) => Err(format!(
                "the mail server did not answer within {} seconds; the mail log will show the outcome",
                wait.as_secs()
            )),
        })
    }

    /// Renders and stores a message: "sent" with its bodies in the dev mailbox, "queued"
    /// without them when it goes to a mail server.
    async fn record(&self, letter: Letter<'_>) -> Result<Outgoing, MailError> {
        let Letter {
            project,
            to,
            template,
            vars,
            smtp: project_override,
            now,
        } = letter;
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
        if dev {
            tracing::info!(to, subject = %rendered.subject, body = %rendered.text, "dev mailbox");
        }
        Ok(Outgoing {
            project,
            id,
            smtp_url,
            message,
        })
    }
}

/// A stored message on its way out.
struct Outgoing {
    project: Uuid,
    id: Uuid,
    /// `None` for the dev mailbox, where storing it was delivering it.
    smtp_url: Option<String>,
    message: Message,
}

impl Outgoing {
    /// Hands the message to its mail server and records the outcome on it.
    async fn deliver(self, store: Store) -> Result<(), String> {
        let Some(url) = self.smtp_url else {
            return Ok(());
        };
        let outcome = deliver(&url, self.message).await;
        let (status, error) = match &outcome {
            Ok(()) => ("sent", None),
            Err(e) => {
                tracing::warn!(error = %e, "mail delivery failed");
                ("failed", Some(e.as_str()))
            }
        };
        if let Err(e) = store
            .set_email_status(self.project, self.id, status, error)
            .await
        {
            tracing::error!(error = %e, "could not record mail status");
        }
        outcome
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
