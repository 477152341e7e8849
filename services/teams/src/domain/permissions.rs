//! Permissions (50 §1): the system ids, the project's definitions with their containment (the
//! defaults until the project changes them), and the checks client calls go through.

use std::collections::BTreeSet;

use latchkey_shared::error::ErrorCode;
use serde_json::json;
use uuid::Uuid;

use crate::error::{coded, Result};
use crate::store::{DefinitionRow, Store};

pub const UPDATE_TEAM: &str = "$update_team";
pub const DELETE_TEAM: &str = "$delete_team";
pub const READ_MEMBERS: &str = "$read_members";
pub const REMOVE_MEMBERS: &str = "$remove_members";
pub const INVITE_MEMBERS: &str = "$invite_members";

/// Built-in team permissions (they contain nothing) and their descriptions.
pub const SYSTEM: [(&str, &str); 6] = [
    (UPDATE_TEAM, "Update the team"),
    (DELETE_TEAM, "Delete the team"),
    (READ_MEMBERS, "Read the team's members"),
    (REMOVE_MEMBERS, "Remove members from the team"),
    (INVITE_MEMBERS, "Invite users to the team"),
    ("$manage_api_keys", "Manage the team's API keys"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Team,
    Project,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Team => "team",
            Self::Project => "project",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub id: String,
    pub scope: Scope,
    pub description: Option<String>,
    pub contained: Vec<String>,
}

impl Definition {
    pub fn to_row(&self) -> DefinitionRow {
        DefinitionRow {
            id: self.id.clone(),
            scope: self.scope.as_str().into(),
            description: self.description.clone(),
            contained: serde_json::to_string(&self.contained).unwrap_or_else(|_| "[]".into()),
        }
    }
}

/// A project's definitions (system ids excluded).
#[derive(Debug, Clone)]
pub struct Definitions(pub Vec<Definition>);

fn team(id: &str, description: &str, contained: &[&str]) -> Definition {
    Definition {
        id: id.into(),
        scope: Scope::Team,
        description: Some(description.into()),
        contained: contained.iter().map(|s| (*s).to_owned()).collect(),
    }
}

impl Definitions {
    /// The definitions of every new project (50 §1.2).
    pub fn defaults() -> Self {
        Self(vec![
            team(
                "team_admin",
                "Default permission for team admins",
                &[
                    UPDATE_TEAM,
                    DELETE_TEAM,
                    READ_MEMBERS,
                    REMOVE_MEMBERS,
                    INVITE_MEMBERS,
                    "$manage_api_keys",
                ],
            ),
            team(
                "team_member",
                "Default permission for team members",
                &[READ_MEMBERS, INVITE_MEMBERS],
            ),
        ])
    }

    pub async fn load(store: &Store, project: Uuid) -> Result<Self> {
        let Some(rows) = store.definitions(project).await? else {
            return Ok(Self::defaults());
        };
        Ok(Self(
            rows.into_iter()
                .map(|r| Definition {
                    scope: if r.scope == "project" {
                        Scope::Project
                    } else {
                        Scope::Team
                    },
                    contained: serde_json::from_str(&r.contained).unwrap_or_default(),
                    id: r.id,
                    description: r.description,
                })
                .collect(),
        ))
    }

    pub fn get(&self, id: &str) -> Option<&Definition> {
        self.0.iter().find(|d| d.id == id)
    }

    /// The scope an id belongs to; system ids are team-scoped.
    pub fn scope_of(&self, id: &str) -> Option<Scope> {
        if SYSTEM.iter().any(|(s, _)| *s == id) {
            return Some(Scope::Team);
        }
        self.get(id).map(|d| d.scope)
    }

    /// `ids` with everything they contain, transitively; ids that no longer exist are skipped
    /// as containers but kept when granted directly.
    pub fn expand<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo: Vec<String> = ids.into_iter().map(str::to_owned).collect();
        while let Some(id) = todo.pop() {
            if out.insert(id.clone()) {
                if let Some(d) = self.get(&id) {
                    todo.extend(d.contained.iter().cloned());
                }
            }
        }
        out
    }
}

/// The permission ids a member holds in a team, containment included.
pub async fn held(
    store: &Store,
    project: Uuid,
    team: Uuid,
    user: Uuid,
) -> Result<BTreeSet<String>> {
    let defs = Definitions::load(store, project).await?;
    let grants = store.grants(project, Some(team), Some(user)).await?;
    let direct = grants.iter().map(|g| g.2.as_str());
    Ok(defs.expand(direct))
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

/// `PERMISSION_NOT_FOUND` or `WRONG_PERMISSION_SCOPE` unless `id` is a `want`-scoped id.
/// System (`$…`) ids are team-scoped, but asked for as project permissions they are simply not
/// found (50 §4): no project permission can ever bear such an id.
pub fn check_scope(defs: &Definitions, id: &str, want: Scope) -> Result<()> {
    let system = id.starts_with('$');
    match defs.scope_of(id) {
        Some(s) if s == want => Ok(()),
        Some(s) if !(system && want == Scope::Project) => Err(coded(
            ErrorCode::WrongPermissionScope,
            format!("{id} is a {}-scope permission.", s.as_str()),
            json!({ "permission_id": id, "expected_scope": want.as_str(), "actual_scope": s.as_str() }),
        )),
        _ => Err(coded(
            ErrorCode::PermissionNotFound,
            format!("No permission {id} exists."),
            json!({ "permission_id": id }),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_expands_to_every_system_permission() {
        let defs = Definitions::defaults();
        let admin = defs.expand(["team_admin"]);
        for (id, _) in SYSTEM {
            assert!(admin.contains(id), "{id}");
        }
        let member = defs.expand(["team_member"]);
        assert!(member.contains(READ_MEMBERS) && !member.contains(REMOVE_MEMBERS));
        assert_eq!(defs.scope_of("$read_members"), Some(Scope::Team));
        assert_eq!(defs.scope_of("nope"), None);
    }
}
