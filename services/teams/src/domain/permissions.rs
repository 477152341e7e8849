//! Team permissions (50 §1–2): the system ids, the default definitions, containment and the
//! checks client calls go through.

use std::collections::BTreeSet;

use latchkey_shared::error::ErrorCode;
use serde_json::json;
use uuid::Uuid;

use crate::error::{coded, Result};
use crate::store::Store;

pub const UPDATE_TEAM: &str = "$update_team";
pub const DELETE_TEAM: &str = "$delete_team";
pub const READ_MEMBERS: &str = "$read_members";
pub const REMOVE_MEMBERS: &str = "$remove_members";
pub const INVITE_MEMBERS: &str = "$invite_members";

/// Built-in team permissions; they contain nothing.
pub const SYSTEM: [&str; 6] = [
    UPDATE_TEAM,
    DELETE_TEAM,
    READ_MEMBERS,
    REMOVE_MEMBERS,
    INVITE_MEMBERS,
    "$manage_api_keys",
];

/// The team-scope definitions of every project (50 §1.2) and what they contain.
fn contained(id: &str) -> Option<&'static [&'static str]> {
    match id {
        "team_member" => Some(&[READ_MEMBERS, INVITE_MEMBERS]),
        "team_admin" => Some(&[
            UPDATE_TEAM,
            DELETE_TEAM,
            READ_MEMBERS,
            REMOVE_MEMBERS,
            INVITE_MEMBERS,
            "$manage_api_keys",
        ]),
        s if SYSTEM.contains(&s) => Some(&[]),
        _ => None,
    }
}

/// Whether `id` names a team-scope permission.
pub fn exists(id: &str) -> bool {
    contained(id).is_some()
}

/// `ids` with everything they contain, transitively; unknown ids are kept as they are.
pub fn expand<'a>(ids: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo: Vec<String> = ids.into_iter().map(str::to_owned).collect();
    while let Some(id) = todo.pop() {
        if out.insert(id.clone()) {
            todo.extend(
                contained(&id)
                    .unwrap_or(&[])
                    .iter()
                    .map(|s| (*s).to_owned()),
            );
        }
    }
    out
}

/// The permission ids a member holds in a team, containment included.
pub async fn held(
    store: &Store,
    project: Uuid,
    team: Uuid,
    user: Uuid,
) -> Result<BTreeSet<String>> {
    let grants = store.grants(project).await?;
    let direct = grants
        .iter()
        .filter(|g| g.0 == team && g.1 == user)
        .map(|g| g.2.as_str());
    Ok(expand(direct))
}

pub fn membership_not_found(team: Uuid, user: Uuid) -> crate::error::Error {
    coded(
        ErrorCode::TeamMembershipNotFound,
        "The user is not a member of this team.",
        json!({ "team_id": team, "user_id": user }),
    )
}

/// A client's check (30, header): member first (404), then the permission (403).
pub async fn require(
    store: &Store,
    project: Uuid,
    team: Uuid,
    user: Uuid,
    permission: &str,
) -> Result<()> {
    if !store.is_member(project, team, user).await? {
        return Err(membership_not_found(team, user));
    }
    if !held(store, project, team, user).await?.contains(permission) {
        return Err(coded(
            ErrorCode::TeamPermissionRequired,
            format!("This needs the {permission} permission in the team."),
            json!({ "team_id": team, "user_id": user, "permission_id": permission }),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_expands_to_every_system_permission() {
        let admin = expand(["team_admin"]);
        for id in SYSTEM {
            assert!(admin.contains(id), "{id}");
        }
        let member = expand(["team_member"]);
        assert!(member.contains(READ_MEMBERS) && !member.contains(REMOVE_MEMBERS));
        assert!(!exists("$nope") && exists("$read_members") && exists("team_admin"));
    }
}
