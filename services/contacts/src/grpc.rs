//! The `Contacts` gRPC API: requests become domain calls, results become proto messages.

use std::collections::HashMap;
use std::sync::Arc;

use latchkey_proto::contacts::v1 as pb;
use latchkey_shared::clock::SharedClock;
use latchkey_shared::codes::Codes;
use latchkey_shared::grpc::Context;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::domain::{channels, verification};
use crate::error::Error;
use crate::mail::{Letter, Mailer};
use crate::store::{Channel, Store};

pub struct Contacts {
    pub store: Store,
    pub codes: Codes,
    pub mailer: Arc<Mailer>,
    pub clock: SharedClock,
    pub auth: latchkey_shared::grpc::auth::Auth,
}

/// Below the gateway's deadline, so a slow mail server is reported rather than timed out.
const TEST_MAIL_WAIT: std::time::Duration = std::time::Duration::from_secs(8);

fn uuid(text: &str, what: &str) -> Result<Uuid, Error> {
    Uuid::parse_str(text).map_err(|_| Error::Invalid(format!("{what} is not a UUID")))
}

fn key(k: &pb::ChannelKey) -> Result<(Uuid, Uuid), Error> {
    Ok((
        uuid(&k.user_id, "user_id")?,
        uuid(&k.id, "id").map_err(|_| Error::ChannelNotFound)?,
    ))
}

fn to_pb(c: Channel) -> pb::Channel {
    pb::Channel {
        id: c.id.to_string(),
        user_id: c.user_id.to_string(),
        r#type: "email".into(),
        value: c.value,
        used_for_auth: c.used_for_auth,
        is_verified: c.is_verified,
        is_primary: c.is_primary,
        created_at_millis: c.created_at_millis,
    }
}

fn list(items: Vec<Channel>) -> Response<pb::ChannelList> {
    Response::new(pb::ChannelList {
        items: items.into_iter().map(to_pb).collect(),
    })
}

fn smtp(settings: Option<pb::MailSettings>) -> Option<(String, String)> {
    settings.map(|m| (m.smtp_url, m.from))
}

#[tonic::async_trait]
impl pb::contacts_server::Contacts for Contacts {
    #[tracing::instrument(name = "contacts.create_channel", skip_all)]
    async fn create_channel(
        &self,
        request: Request<pb::CreateChannelRequest>,
    ) -> Result<Response<pb::Channel>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        if req.check_user {
            self.auth.ensure_user(&ctx, &req.user_id).await?;
        }
        let new = channels::NewChannel {
            id: uuid(&req.id, "id")?,
            user_id: uuid(&req.user_id, "user_id")?,
            value: req.value,
            used_for_auth: req.used_for_auth,
            is_verified: req.is_verified,
            is_primary: req.is_primary,
        };
        let channel =
            channels::create(&self.store, ctx.project_id, new, self.clock.now_millis()).await?;
        Ok(Response::new(to_pb(channel)))
    }

    async fn delete_channel(
        &self,
        request: Request<pb::ChannelRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let id = uuid(&request.get_ref().id, "id")?;
        self.store
            .delete(ctx.project_id, id)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::Empty {}))
    }

    #[tracing::instrument(name = "contacts.remove_user", skip_all)]
    async fn remove_user(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read_server(request.metadata())?;
        let user = uuid(&request.get_ref().user_id, "user_id")?;
        self.store
            .delete_user(ctx.project_id, user)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn find_auth_channel(
        &self,
        request: Request<pb::FindAuthChannelRequest>,
    ) -> Result<Response<pb::FindAuthChannelResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let (channel, owner_channels) = if req.with_owner_channels {
            channels::find_auth_with_owner(&self.store, ctx.project_id, &req.email)
                .await?
                .unzip()
        } else {
            let found = channels::find_auth(&self.store, ctx.project_id, &req.email).await?;
            (found, None)
        };
        let owner_channels = owner_channels.unwrap_or_default();
        Ok(Response::new(pb::FindAuthChannelResponse {
            channel: channel.map(to_pb),
            owner_channels: owner_channels.into_iter().map(to_pb).collect(),
        }))
    }

    async fn list_channels(
        &self,
        request: Request<pb::ListChannelsRequest>,
    ) -> Result<Response<pb::ChannelList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let users = req
            .user_ids
            .iter()
            .map(|u| uuid(u, "user_ids"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut items = self
            .store
            .channels_of(ctx.project_id, &users)
            .await
            .map_err(Error::from)?;
        if let Some(id) = req.contact_channel_id {
            items.retain(|c| c.id.to_string() == id);
        }
        Ok(list(items))
    }

    #[tracing::instrument(name = "contacts.set_primary_email", skip_all)]
    async fn set_primary_email(
        &self,
        request: Request<pb::SetPrimaryEmailRequest>,
    ) -> Result<Response<pb::ChannelList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let change = channels::PrimaryChange {
            email: req.email,
            clear: req.clear,
            verified: req.verified,
            auth_enabled: req.auth_enabled,
            new_channel_id: uuid(&req.new_channel_id, "new_channel_id")?,
        };
        let user = uuid(&req.user_id, "user_id")?;
        let items = channels::set_primary(
            &self.store,
            ctx.project_id,
            user,
            change,
            self.clock.now_millis(),
        )
        .await?;
        Ok(list(items))
    }

    async fn search_users(
        &self,
        request: Request<pb::SearchUsersRequest>,
    ) -> Result<Response<pb::UserIds>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let start = latchkey_shared::db::search::Start::parse(
            req.from_user_id.as_deref(),
            req.include_from,
            req.desc,
        )
        .map_err(|_| Error::Invalid("from_user_id is not a UUID".into()))?;
        let want = if req.limit == 0 {
            usize::MAX
        } else {
            req.limit as usize
        };
        let ids = self
            .store
            .search_users(ctx.project_id, &req.text, start, want)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::UserIds {
            user_ids: ids.iter().map(Uuid::to_string).collect(),
        }))
    }

    #[tracing::instrument(name = "contacts.send_verification_code", skip_all)]
    async fn send_verification_code(
        &self,
        request: Request<pb::SendVerificationCodeRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let send = verification::Send {
            user_id: uuid(&req.user_id, "user_id")?,
            email: &req.email,
            callback_url: &req.callback_url,
            project_name: &req.project_name,
            smtp: smtp(req.mail),
        };
        let now = self.clock.now_millis();
        verification::send(
            &self.store,
            &self.codes,
            &self.mailer,
            ctx.project_id,
            send,
            now,
        )
        .await?;
        Ok(Response::new(pb::Empty {}))
    }

    #[tracing::instrument(name = "contacts.send_email", skip_all, fields(template = %request.get_ref().template))]
    async fn send_email(
        &self,
        request: Request<pb::SendEmailRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let vars: HashMap<String, String> = req.variables.into_iter().collect();
        self.mailer
            .send(Letter {
                project: ctx.project_id,
                to: &req.to,
                template: &req.template,
                vars: &vars,
                smtp: smtp(req.mail),
                now: self.clock.now_millis(),
            })
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::Empty {}))
    }

    #[tracing::instrument(name = "contacts.send_test_email", skip_all)]
    async fn send_test_email(
        &self,
        request: Request<pb::SendTestEmailRequest>,
    ) -> Result<Response<pb::TestEmailResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        let to = request.into_inner().to;
        if !latchkey_shared::email::is_valid(&to) {
            return Err(Error::Invalid("recipient_email must be an e-mail address".into()).into());
        }
        let mail = self.auth.mail_context(&ctx, "").await?;
        let vars = [("project", mail.project_name), ("email", to.clone())]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let outcome = self
            .mailer
            .send_and_wait(
                Letter {
                    project: ctx.project_id,
                    to: &to,
                    template: "test",
                    vars: &vars,
                    smtp: mail.smtp_url.zip(mail.from),
                    now: self.clock.now_millis(),
                },
                TEST_MAIL_WAIT,
            )
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::TestEmailResult {
            success: outcome.is_ok(),
            error_message: outcome.err(),
        }))
    }

    async fn get_channel(
        &self,
        request: Request<pb::ChannelKey>,
    ) -> Result<Response<pb::Channel>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (user, id) = key(request.get_ref())?;
        Ok(Response::new(to_pb(
            channels::get(&self.store, ctx.project_id, user, id).await?,
        )))
    }

    #[tracing::instrument(name = "contacts.update_channel", skip_all)]
    async fn update_channel(
        &self,
        request: Request<pb::UpdateChannelRequest>,
    ) -> Result<Response<pb::Channel>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let (user, id) = (
            uuid(&req.user_id, "user_id")?,
            uuid(&req.id, "id").map_err(|_| Error::ChannelNotFound)?,
        );
        let change = channels::ChannelChange {
            value: req.value,
            used_for_auth: req.used_for_auth,
            is_verified: req.is_verified,
            is_primary: req.is_primary,
        };
        Ok(Response::new(to_pb(
            channels::update(&self.store, ctx.project_id, user, id, change).await?,
        )))
    }

    async fn delete_user_channel(
        &self,
        request: Request<pb::ChannelKey>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (user, id) = key(request.get_ref())?;
        channels::delete(&self.store, ctx.project_id, user, id).await?;
        Ok(Response::new(pb::Empty {}))
    }

    #[tracing::instrument(name = "contacts.request_verification", skip_all)]
    async fn request_verification(
        &self,
        request: Request<pb::RequestVerificationRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let mail = self.auth.mail_context(&ctx, &req.callback_url).await?;
        if !mail.callback_url_trusted {
            return Err(Error::UrlNotTrusted.into());
        }
        self.auth.ensure_user(&ctx, &req.user_id).await?;
        let user = uuid(&req.user_id, "user_id")?;
        let address = match req.target {
            Some(pb::request_verification_request::Target::ChannelId(id)) => {
                let id = uuid(&id, "channel id").map_err(|_| Error::ChannelNotFound)?;
                channels::get(&self.store, ctx.project_id, user, id)
                    .await?
                    .value
            }
            Some(pb::request_verification_request::Target::Email(email)) => {
                let all = self
                    .store
                    .channels_of(ctx.project_id, &[user])
                    .await
                    .map_err(Error::from)?;
                let primary = all.into_iter().find(|c| c.is_primary).map(|c| c.value);
                let wanted = latchkey_shared::email::normalize(&email);
                if primary.as_deref() != Some(wanted.as_str()) {
                    return Err(Error::NotPrimaryEmail { email, primary }.into());
                }
                wanted
            }
            None => {
                return Err(Error::Invalid("a channel id or an e-mail is required".into()).into())
            }
        };
        let smtp = mail.smtp_url.zip(mail.from);
        let send = verification::Send {
            user_id: user,
            email: &address,
            callback_url: &req.callback_url,
            project_name: &mail.project_name,
            smtp,
        };
        verification::send(
            &self.store,
            &self.codes,
            &self.mailer,
            ctx.project_id,
            send,
            self.clock.now_millis(),
        )
        .await?;
        Ok(Response::new(pb::Empty {}))
    }

    #[tracing::instrument(name = "contacts.verify", skip_all)]
    async fn verify(
        &self,
        request: Request<pb::VerificationCode>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        verification::verify(
            &self.store,
            &self.codes,
            ctx.project_id,
            &request.get_ref().code,
        )
        .await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn check_verification_code(
        &self,
        request: Request<pb::VerificationCode>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        verification::check(&self.codes, ctx.project_id, &request.get_ref().code).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn list_emails(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::EmailList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let items = self
            .store
            .emails(ctx.project_id)
            .await
            .map_err(Error::from)?
            .into_iter()
            .map(|e| pb::Email {
                id: e.id.to_string(),
                to: e.recipient,
                subject: e.subject,
                template: e.template,
                status: e.status,
                error: e.error,
                created_at_millis: e.created_at_millis,
                text: e.text_body,
                html: e.html_body,
            })
            .collect();
        Ok(Response::new(pb::EmailList { items }))
    }
}
