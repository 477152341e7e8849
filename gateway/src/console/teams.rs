//! The console's teams pages: the project's teams, and a page per team with its members (their
//! profiles and permissions), pending invitations, and adding and removing members.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use latchkey_proto::teams::v1 as pb;
use serde::Deserialize;
use uuid::Uuid;

use super::pages::{self, page, redirect, Confirm, MemberRow, Nav, TeamRow};
use super::session::Session;
use super::{uuid_param, CsrfOnly, Posted, Signed};
use crate::routes::{team_invitations, team_member_profiles, teams as api};
use crate::state::AppState;

pub async fn list(State(app): State<AppState>, Signed(_, session): Signed) -> Response {
    match api::teams(&app, &session.access(None), None).await {
        Ok(teams) => page(
            StatusCode::OK,
            &pages::Teams {
                nav: Some(Nav::of(&session, "teams")),
                teams: teams.iter().map(TeamRow::of).collect(),
            },
        ),
        Err(e) => e.into_response(),
    }
}

const MEMBER: pages::Thing = pages::Thing {
    section: "teams",
    what: "team member",
    back: "/console/teams",
};

/// The team page; `add` is the add-member form as sent, with the API's refusal.
async fn team_page(
    app: &AppState,
    session: &Session,
    id: &str,
    status: StatusCode,
    notice: Option<String>,
    add: (String, Option<String>),
) -> Response {
    let access = session.access(None);
    let team = match api::team(app, &access, id.to_owned()).await {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let profiles = team_member_profiles::profiles(
        app,
        &access,
        pb::ListProfilesRequest {
            team_id: Some(id.to_owned()),
            user_id: None,
        },
    );
    let grants = api::team_permissions(
        app,
        &access,
        pb::ListTeamPermissionsRequest {
            team_id: Some(id.to_owned()),
            user_id: None,
            permission_id: None,
            recursive: false,
        },
    );
    let invitations = team_invitations::invitations(
        app,
        &access,
        pb::ListInvitationsRequest {
            team_id: Some(id.to_owned()),
            user_id: None,
        },
    );
    let (profiles, grants, invitations) = match tokio::try_join!(profiles, grants, invitations) {
        Ok(all) => all,
        Err(e) => return e.into_response(),
    };
    let mut permissions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in &grants {
        if let (Some(user), Some(p)) = (g["user_id"].as_str(), g["id"].as_str()) {
            permissions
                .entry(user.to_owned())
                .or_default()
                .push(p.to_owned());
        }
    }
    let members = profiles
        .iter()
        .map(|p| {
            let user_id = p["user_id"].as_str().unwrap_or_default().to_owned();
            MemberRow {
                name: p["display_name"].as_str().unwrap_or_default().to_owned(),
                email: p["user"]["primary_email"]
                    .as_str()
                    .unwrap_or("(no e-mail)")
                    .to_owned(),
                permissions: permissions
                    .get(&user_id)
                    .map(|p| p.join(", "))
                    .unwrap_or_default(),
                user_id,
            }
        })
        .collect();
    let invitations = invitations
        .iter()
        .map(|i| {
            (
                i["recipient_email"].as_str().unwrap_or_default().to_owned(),
                latchkey_shared::clock::iso8601_millis(
                    i["expires_at_millis"].as_i64().unwrap_or_default(),
                ),
            )
        })
        .collect();
    page(
        status,
        &pages::Team {
            nav: Some(Nav::of(session, "teams")),
            csrf: session.csrf.clone(),
            team: TeamRow::of(&team),
            members,
            invitations,
            notice,
            add_user_id: add.0,
            add_error: add.1,
        },
    )
}

pub async fn show(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/teams");
    };
    team_page(
        &app,
        &session,
        &id,
        StatusCode::OK,
        None,
        Default::default(),
    )
    .await
}

#[derive(Deserialize)]
pub struct AddForm {
    csrf: Option<String>,
    user_id: String,
}

pub async fn add_member(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), form): Posted<AddForm>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/teams");
    };
    let sent = form.user_id.trim().to_owned();
    let refused = |message: String| (sent.clone(), Some(message));
    let Ok(user) = Uuid::parse_str(&sent) else {
        let add = refused("A user id (a UUID) is needed.".into());
        return team_page(&app, &session, &id, StatusCode::BAD_REQUEST, None, add).await;
    };
    let member = pb::MemberRef {
        team_id: id.clone(),
        user_id: user.to_string(),
    };
    match api::add(&app, &session.access(None), member).await {
        Ok(()) => {
            let notice = Some("The member was added.".to_owned());
            team_page(
                &app,
                &session,
                &id,
                StatusCode::OK,
                notice,
                Default::default(),
            )
            .await
        }
        Err(e) => {
            let add = refused(e.0.message);
            team_page(&app, &session, &id, StatusCode::BAD_REQUEST, None, add).await
        }
    }
}

pub async fn confirm_remove(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path((id, user)): Path<(String, String)>,
) -> Response {
    let (Some(id), Some(user)) = (uuid_param(&id), uuid_param(&user)) else {
        return redirect("/console/teams");
    };
    let member = pb::MemberRef {
        team_id: id.clone(),
        user_id: user.clone(),
    };
    let found = team_member_profiles::profile(&app, &session.access(None), member).await;
    if let Some(refusal) = pages::unless_found(found.map(|_| true), &session, &MEMBER) {
        return refusal;
    }
    page(
        StatusCode::OK,
        &Confirm {
            nav: Some(Nav::of(&session, "teams")),
            csrf: session.csrf.clone(),
            question: "Remove this member?".into(),
            consequence: format!(
                "User {user} leaves team {id} with its team profile and permissions, and a \
                 team_membership.deleted event is sent."
            ),
            action: format!("/console/teams/{id}/members/{user}/remove"),
            confirm: "Remove",
            back: "/console/teams",
        },
    )
}

pub async fn remove_member(
    State(app): State<AppState>,
    Path((id, user)): Path<(String, String)>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let (Some(id), Some(user)) = (uuid_param(&id), uuid_param(&user)) else {
        return redirect("/console/teams");
    };
    let member = pb::MemberRef {
        team_id: id.clone(),
        user_id: user,
    };
    let notice = match api::remove(&app, &session.access(None), member).await {
        Ok(()) => "The member was removed.".to_owned(),
        Err(e) => e.0.message,
    };
    team_page(
        &app,
        &session,
        &id,
        StatusCode::OK,
        Some(notice),
        Default::default(),
    )
    .await
}

super::csrf_form!(AddForm);
