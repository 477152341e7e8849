//! Team invitations (30 §4, 80 §10): codes of kind `TEAM_INVITATION` bound to a team and a
//! recipient address, mailed through contacts, accepted by code or by id.

use std::collections::HashMap;

use latchkey_proto::contacts::v1 as contacts;
use latchkey_shared::codes::{self, Code, CodeError};
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::{json, Value};
use uuid::Uuid;

use super::permissions::{self, Definitions, Scope};
use super::teams::Teams;
use crate::error::{coded, Error, Result};

pub const KIND: &str = "TEAM_INVITATION";
const LIFETIME_MILLIS: i64 = 7 * 24 * 60 * 60 * 1000;

fn code_not_found() -> Error {
    Error::Coded(CodeError::NotFound.into())
}

fn signed_in(ctx: &Context) -> Result<Uuid> {
    ctx.user_id.ok_or_else(|| {
        coded(
            ErrorCode::UserAuthenticationRequired,
            "This endpoint needs a signed-in user.",
            Value::Null,
        )
    })
}

fn team_of(data: &Value) -> Option<Uuid> {
    data["team_id"]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
}

/// What `send-code` asks for.
pub struct Invite<'a> {
    pub team: Uuid,
    pub email: &'a str,
    pub callback_url: &'a str,
    pub permission_ids: Vec<String>,
}

impl Teams {
    /// Refuses restricted users (they cannot join teams by invitation, 20 §1.3).
    async fn not_restricted(&self, ctx: &Context, user: Uuid) -> Result<()> {
        let users = self.auth.users(ctx, &[user.to_string()]).await?;
        let restricted = users
            .first()
            .and_then(|u| u["is_restricted"].as_bool())
            .unwrap_or(false);
        if restricted {
            let reason = users
                .first()
                .map(|u| u["restricted_reason"].clone())
                .unwrap_or(Value::Null);
            return Err(coded(
                ErrorCode::TeamInvitationRestrictedUserNotAllowed,
                "Restricted users cannot accept team invitations.",
                json!({ "restricted_reason": reason }),
            ));
        }
        Ok(())
    }

    /// `POST /team-invitations/send-code`.
    pub async fn invite(&self, ctx: &Context, invite: Invite<'_>) -> Result<Uuid> {
        let client = ctx.access_type == AccessType::Client;
        if client {
            let me = signed_in(ctx)?;
            permissions::require(
                &self.store,
                ctx.project_id,
                invite.team,
                me,
                permissions::INVITE_MEMBERS,
            )
            .await?;
            let held = permissions::held(&self.store, ctx.project_id, invite.team, me).await?;
            if let Some(missing) = invite.permission_ids.iter().find(|p| !held.contains(*p)) {
                return Err(coded(
                    ErrorCode::TeamPermissionRequired,
                    format!("Handing out {missing} needs holding it."),
                    json!({ "team_id": invite.team, "user_id": me, "permission_id": missing }),
                ));
            }
        }
        let team = self.get(ctx, invite.team).await?;
        let defs = Definitions::load(&self.store, ctx.project_id).await?;
        for p in &invite.permission_ids {
            permissions::check_scope(&defs, p, Scope::Team)?;
        }
        if !latchkey_shared::email::is_valid(invite.email) {
            return Err(Error::Invalid("email must be an e-mail address".into()));
        }
        let mail = self.auth.mail_context(ctx, invite.callback_url).await?;
        if !mail.callback_url_trusted {
            return Err(coded(
                ErrorCode::RedirectUrlNotWhitelisted,
                "The URL is not trusted by the project.",
                Value::Null,
            ));
        }
        let email = latchkey_shared::email::normalize(invite.email);
        let data = json!({ "team_id": invite.team, "email": email, "permission_ids": invite.permission_ids });
        let (id, code) = self
            .codes
            .create_with_id(ctx.project_id, KIND, &data, LIFETIME_MILLIS)
            .await?;
        let variables: HashMap<String, String> = [
            (
                "team",
                team["display_name"].as_str().unwrap_or_default().to_owned(),
            ),
            ("link", codes::link(invite.callback_url, &code)),
            ("project", mail.project_name.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let request = contacts::SendEmailRequest {
            to: email,
            template: "team_invitation".into(),
            variables,
            mail: mail
                .smtp_url
                .zip(mail.from)
                .map(|(smtp_url, from)| contacts::MailSettings { smtp_url, from }),
        };
        self.contacts
            .clone()
            .send_email(ctx.clone().request(request))
            .await?;
        Ok(id)
    }

    /// `GET /team-invitations?team_id=` or `?user_id=` (exactly one, 30 §4.3 rules 2–3).
    pub async fn list_invitations(
        &self,
        ctx: &Context,
        team: Option<Uuid>,
        user: Option<Uuid>,
    ) -> Result<Vec<Value>> {
        let pending = self.codes.pending(ctx.project_id, KIND).await?;
        let item = |p: &codes::Pending| json!({ "id": p.id, "team_id": p.data["team_id"], "expires_at_millis": p.expires_at_millis, "recipient_email": p.data["email"] });
        match (team, user) {
            (Some(team), None) => {
                if ctx.access_type == AccessType::Client {
                    let me = signed_in(ctx)?;
                    permissions::require(
                        &self.store,
                        ctx.project_id,
                        team,
                        me,
                        permissions::READ_MEMBERS,
                    )
                    .await?;
                    permissions::require(
                        &self.store,
                        ctx.project_id,
                        team,
                        me,
                        permissions::INVITE_MEMBERS,
                    )
                    .await?;
                } else {
                    self.get(ctx, team).await?;
                }
                Ok(pending
                    .iter()
                    .filter(|p| team_of(&p.data) == Some(team))
                    .map(item)
                    .collect())
            }
            (None, Some(user)) => {
                let request = contacts::ListChannelsRequest {
                    user_ids: vec![user.to_string()],
                    contact_channel_id: None,
                };
                let channels = self
                    .contacts
                    .clone()
                    .list_channels(ctx.clone().request(request))
                    .await?
                    .into_inner()
                    .items;
                let verified: Vec<String> = channels
                    .into_iter()
                    .filter(|c| c.is_verified)
                    .map(|c| c.value)
                    .collect();
                let mut out = Vec::new();
                for p in &pending {
                    let to_user = p.data["email"]
                        .as_str()
                        .is_some_and(|e| verified.iter().any(|v| v == e));
                    let team_alive = match team_of(&p.data) {
                        Some(t) => self.store.team(ctx.project_id, t).await?.is_some(),
                        None => false,
                    };
                    if to_user && team_alive {
                        out.push(item(p));
                    }
                }
                Ok(out)
            }
            _ => Err(coded(
                ErrorCode::BadRequest,
                "Pass exactly one of team_id and user_id.",
                Value::Null,
            )),
        }
    }

    /// `DELETE /team-invitations/{id}?team_id=`.
    pub async fn revoke_invitation(&self, ctx: &Context, team: Uuid, id: Uuid) -> Result<()> {
        if ctx.access_type == AccessType::Client {
            permissions::require(
                &self.store,
                ctx.project_id,
                team,
                signed_in(ctx)?,
                permissions::REMOVE_MEMBERS,
            )
            .await?;
        } else {
            self.get(ctx, team).await?;
        }
        let pending = self.codes.pending(ctx.project_id, KIND).await?;
        if !pending
            .iter()
            .any(|p| p.id == id && team_of(&p.data) == Some(team))
        {
            return Err(code_not_found());
        }
        self.codes.delete(ctx.project_id, KIND, id).await?;
        Ok(())
    }

    /// Adds the user to the invitation's team unless already a member, with the member
    /// defaults and the invitation's extra permissions.
    async fn join(&self, ctx: &Context, code: &Code, user: Uuid) -> Result<()> {
        let team = team_of(&code.data).ok_or_else(code_not_found)?;
        if self.store.is_member(ctx.project_id, team, user).await? {
            return Ok(());
        }
        let extra: Vec<String> = code.data["permission_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(str::to_owned))
            .collect();
        self.add_member_with(ctx, team, user, &extra).await
    }

    /// `POST /team-invitations/accept`: the user is checked before the code is consumed.
    pub async fn accept(&self, ctx: &Context, code: &str) -> Result<()> {
        let me = signed_in(ctx)?;
        self.not_restricted(ctx, me).await?;
        let found = self.codes.check(ctx.project_id, KIND, code).await?;
        self.codes.consume(ctx.project_id, &found).await?;
        self.join(ctx, &found, me).await
    }

    /// `POST /team-invitations/accept/details`: counts as an attempt, consumes nothing.
    pub async fn invitation_details(&self, ctx: &Context, code: &str) -> Result<Value> {
        let me = signed_in(ctx)?;
        self.not_restricted(ctx, me).await?;
        let found = self.codes.check(ctx.project_id, KIND, code).await?;
        let team_id = team_of(&found.data).ok_or_else(code_not_found)?;
        let team = self
            .store
            .team(ctx.project_id, team_id)
            .await?
            .ok_or_else(|| {
                coded(
                    ErrorCode::TeamNotFound,
                    "The team no longer exists.",
                    json!({ "team_id": team_id }),
                )
            })?;
        Ok(json!({ "team_id": team_id, "team_display_name": team.display_name }))
    }

    pub async fn check_invitation(&self, ctx: &Context, code: &str) -> Result<()> {
        self.codes.check(ctx.project_id, KIND, code).await?;
        Ok(())
    }

    /// `POST /team-invitations/{id}/accept?user_id=`: for a user with a verified address equal
    /// to the recipient's.
    pub async fn accept_by_id(&self, ctx: &Context, id: Uuid, user: Uuid) -> Result<()> {
        self.not_restricted(ctx, user).await?;
        let pending = self.codes.pending(ctx.project_id, KIND).await?;
        let invitation = pending
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(code_not_found)?;
        let request = contacts::ListChannelsRequest {
            user_ids: vec![user.to_string()],
            contact_channel_id: None,
        };
        let channels = self
            .contacts
            .clone()
            .list_channels(ctx.clone().request(request))
            .await?
            .into_inner()
            .items;
        let recipient = invitation.data["email"].as_str().unwrap_or_default();
        if !channels
            .iter()
            .any(|c| c.is_verified && c.value == recipient)
        {
            return Err(code_not_found());
        }
        let code = Code {
            id: invitation.id,
            data: invitation.data,
            created_at_millis: 0,
        };
        self.codes.consume(ctx.project_id, &code).await?;
        self.join(ctx, &code, user).await
    }
}
