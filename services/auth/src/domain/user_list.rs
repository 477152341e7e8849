//! `GET /users` (20 §2.1): pages of users in sign-up order, every variant read from indexes.

use std::collections::HashMap;

use latchkey_proto::contacts::v1 as contacts;
use latchkey_proto::teams::v1 as teams;
use latchkey_shared::db::search::{Ids, Start};
use latchkey_shared::grpc::Context;
use serde_json::Value;
use uuid::Uuid;

use super::users::{channels_of, oauth_of, of, view, with_selected_teams};
use crate::app::App;
use crate::error::{Error, Result};
use crate::store::accounts::UserRow;

/// Query of `GET /users` (20 §2.1).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub limit: Option<usize>,
    pub cursor: Option<Uuid>,
    pub desc: bool,
    pub query: Option<String>,
    pub team_id: Option<Uuid>,
    pub include_restricted: bool,
    /// Anonymous users too (and, as in Stack Auth, restricted ones).
    pub include_anonymous: bool,
    pub only_anonymous: bool,
}

impl ListQuery {
    /// Which users the plain list reads from its index: anonymous ones only, the others only,
    /// or all.
    fn anonymous(&self) -> Option<bool> {
        if self.only_anonymous {
            Some(true)
        } else if self.include_anonymous {
            None
        } else {
            Some(false)
        }
    }

    /// Whether a composed user belongs in the list: anonymous users only when asked for,
    /// other restricted users when either is asked for.
    fn shows(&self, user: &Value) -> bool {
        let anonymous = user["is_anonymous"] == true;
        if self.only_anonymous {
            return anonymous;
        }
        if anonymous {
            return self.include_anonymous;
        }
        user["is_restricted"] == false || self.include_restricted || self.include_anonymous
    }
}

/// Candidates asked of a source at a time.
const BATCH: usize = 500;

/// One page of users and the cursor of the next. Every variant reads from indexes in list
/// order (user ids are minted from the sign-up instant, so id order is sign-up order): the
/// users themselves, a team's members (teams), or search matches (display names here, contact
/// values in contacts); then only the users of the page are composed. The plain list reads
/// anonymous users, or the others, from an index of their own; restricted users left out,
/// anonymous ones in the other variants, and search matches within a team are filtered after
/// composing, batch by batch, until the page is full.
pub async fn list(app: &App, ctx: &Context, q: &ListQuery) -> Result<(Vec<Value>, Option<Uuid>)> {
    let (_, settings) = app.project(ctx.project_id).await?;
    let mut start = match q.cursor {
        None => Start::first(q.desc),
        // An unknown cursor gives an empty page (00 §5).
        Some(id) => match app.accounts.user(ctx.project_id, id).await? {
            Some(_) => Start {
                id: Some(id),
                inclusive: true,
                desc: q.desc,
            },
            None => return Ok((Vec::new(), None)),
        },
    };
    let text = q.query.as_deref().filter(|t| !t.is_empty());
    let needle = text.map(Needle::new);
    // One more than the page tells whether another page follows.
    let want = q.limit.map(|l| l.saturating_add(1));
    let mut users: Vec<Value> = Vec::new();
    loop {
        let need = want.map_or(BATCH, |w| w.saturating_sub(users.len()).clamp(1, BATCH));
        let (rows, last, exhausted) = candidates(app, ctx, q, text, start, need).await?;
        let Some(last) = last else { break };
        start = Start::after(last, q.desc);
        // Ids without a user (deleted meanwhile, or an address reserved for an unfinished
        // sign-up) add nothing; composing no users must not ask for all of them.
        if rows.is_empty() {
            if exhausted {
                break;
            }
            continue;
        }
        let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
        let (channels, oauth) =
            tokio::try_join!(channels_of(app, ctx, &ids), oauth_of(app, ctx, &ids))?;
        // Within a team, the search applies to the members found (the team is the index).
        let matching = |r: &UserRow| {
            q.team_id.is_none()
                || needle
                    .as_ref()
                    .is_none_or(|n| n.matches(r, of(&channels, &r.id)))
        };
        users.extend(
            rows.iter()
                .filter(|r| matching(r))
                .map(|r| view(r, of(&channels, &r.id), of(&oauth, &r.id), &settings))
                .filter(|u| q.shows(u)),
        );
        if exhausted || want.is_some_and(|w| users.len() >= w) {
            break;
        }
    }
    let next = q.limit.and_then(|limit| cut_page(&mut users, limit));
    with_selected_teams(app, ctx, &mut users).await?;
    Ok((users, next))
}

/// Up to `need` candidate users in list order from `start`, the last candidate id (where the
/// next batch starts), and whether none follow.
async fn candidates(
    app: &App,
    ctx: &Context,
    q: &ListQuery,
    text: Option<&str>,
    start: Start,
    need: usize,
) -> Result<(Vec<UserRow>, Option<Uuid>, bool)> {
    let ids = match (q.team_id, text) {
        (None, None) => {
            let rows = app
                .accounts
                .users_page(ctx.project_id, start, need, q.anonymous())
                .await?;
            let exhausted = rows.len() < need;
            let last = rows.last().map(|r| r.id);
            return Ok((rows, last, exhausted));
        }
        (Some(team), _) => team_members(app, ctx, team, start, need).await?,
        (None, Some(text)) => search(app, ctx, text, start, need).await?,
    };
    let found = app.accounts.users_by_ids(ctx.project_id, &ids.ids).await?;
    let mut by_id: HashMap<Uuid, UserRow> = found.into_iter().map(|r| (r.id, r)).collect();
    // In the order found; ids without a user (deleted meanwhile) drop out.
    let rows = ids.ids.iter().filter_map(|id| by_id.remove(id)).collect();
    Ok((rows, ids.ids.last().copied(), ids.exhausted))
}

fn request_start(start: Start) -> (Option<String>, bool, bool) {
    (
        start.id.map(|id| id.to_string()),
        start.inclusive,
        start.desc,
    )
}

/// A source's answer to a request for `need` ids: exhausted when it had fewer.
fn ids_of(texts: Vec<String>, need: usize) -> Ids {
    let ids: Vec<Uuid> = texts
        .iter()
        .filter_map(|t| Uuid::parse_str(t).ok())
        .collect();
    Ids {
        exhausted: ids.len() < need,
        ids,
    }
}

/// A page of a team's members, from teams' index.
async fn team_members(
    app: &App,
    ctx: &Context,
    team: Uuid,
    start: Start,
    need: usize,
) -> Result<Ids> {
    let (from_user_id, include_from, desc) = request_start(start);
    let request = teams::MembersRequest {
        team_id: team.to_string(),
        from_user_id,
        include_from,
        desc,
        limit: u32::try_from(need).unwrap_or(u32::MAX),
    };
    let found = app
        .teams()
        .members_of_team(app.to_service(ctx, request))
        .await?;
    Ok(ids_of(found.into_inner().user_ids, need))
}

/// Users matching the search text (20 §2.1): the user with that id, users whose display name
/// contains it (here), users with a contact value containing it (contacts); each side answers
/// in list order, and the merge keeps only what both sides have answered for.
async fn search(app: &App, ctx: &Context, text: &str, start: Start, need: usize) -> Result<Ids> {
    let (from_user_id, include_from, desc) = request_start(start);
    let request = contacts::SearchUsersRequest {
        text: text.to_owned(),
        from_user_id,
        include_from,
        desc,
        limit: u32::try_from(need).unwrap_or(u32::MAX),
    };
    let by_channel = async {
        let found = app
            .contacts()
            .search_users(app.to_service(ctx, request))
            .await?;
        Ok::<_, Error>(ids_of(found.into_inner().user_ids, need))
    };
    let by_name = async {
        Ok::<_, Error>(
            app.accounts
                .search_display_names(ctx.project_id, text, start, need)
                .await?,
        )
    };
    let by_id = async {
        let id = Uuid::parse_str(&id_text(text))
            .ok()
            .filter(|id| start.admits(*id));
        let ids = match id {
            Some(id) if app.accounts.user(ctx.project_id, id).await?.is_some() => vec![id],
            _ => Vec::new(),
        };
        Ok::<_, Error>(Ids {
            ids,
            exhausted: true,
        })
    };
    let (by_channel, by_name, by_id) = tokio::try_join!(by_channel, by_name, by_id)?;
    Ok(merge([by_channel, by_name, by_id], start.desc, need))
}

/// The first `need` ids of sources in list order, up to where every source that has more has
/// answered (a source that stopped at `need` may hold ids before another's last).
fn merge<const N: usize>(sources: [Ids; N], desc: bool, need: usize) -> Ids {
    let in_order = |a: &Uuid, b: &Uuid| if desc { b.cmp(a) } else { a.cmp(b) };
    let bound = sources
        .iter()
        .filter(|s| !s.exhausted)
        .filter_map(|s| s.ids.last().copied())
        .min_by(in_order);
    let all_exhausted = sources.iter().all(|s| s.exhausted);
    let mut ids: Vec<Uuid> = sources.into_iter().flat_map(|s| s.ids).collect();
    ids.sort_by(in_order);
    ids.dedup();
    if let Some(bound) = bound {
        ids.retain(|id| in_order(id, &bound) != std::cmp::Ordering::Greater);
    }
    let exhausted = all_exhausted && ids.len() <= need;
    ids.truncate(need);
    Ids { ids, exhausted }
}

/// The search text as a user id may be written: letters, digits, `-`, `_` and `.` kept.
fn id_text(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect::<String>()
        .to_lowercase()
}

/// The search text prepared once for the search rule (20 §2.1).
struct Needle {
    lower: String,
    id: String,
}

impl Needle {
    fn new(text: &str) -> Self {
        Self {
            lower: text.to_lowercase(),
            id: id_text(text),
        }
    }

    /// On one user: its id, display name or any contact value.
    fn matches(&self, row: &UserRow, channels: &[contacts::Channel]) -> bool {
        row.id.to_string() == self.id
            || row
                .display_name
                .as_ref()
                .is_some_and(|n| n.to_lowercase().contains(&self.lower))
            || channels
                .iter()
                .any(|c| c.value.to_lowercase().contains(&self.lower))
    }
}

/// Keeps the first `limit` users; the id of the first one left out is the next page's cursor.
fn cut_page(users: &mut Vec<Value>, limit: usize) -> Option<Uuid> {
    let next = users
        .get(limit)
        .and_then(|u| u["id"].as_str())
        .and_then(|s| Uuid::parse_str(s).ok());
    users.truncate(limit);
    next
}
