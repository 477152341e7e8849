//! Permission definitions, admin only (50 §4): create, change (with rename), delete, list.

use latchkey_shared::error::ErrorCode;
use serde_json::{json, Value};
use uuid::Uuid;

use super::permissions::{Definition, Definitions, Scope, SYSTEM};
use crate::error::{coded, Error, Result};
use crate::store::Store;

fn custom_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b':');
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "permission ids must match ^[a-z0-9_:]+$: {id}"
        )))
    }
}

fn not_found(id: &str) -> Error {
    coded(
        ErrorCode::PermissionNotFound,
        format!("No permission {id} exists."),
        json!({ "permission_id": id }),
    )
}

fn taken(id: &str) -> Error {
    coded(
        ErrorCode::PermissionIdAlreadyExists,
        format!("A permission {id} already exists."),
        json!({ "permission_id": id }),
    )
}

fn to_json(d: &Definition) -> Value {
    let mut contained = d.contained.clone();
    contained.sort();
    json!({ "id": d.id, "description": d.description, "contained_permission_ids": contained })
}

/// Contained ids must exist in the same scope (system ids count for the team scope).
fn check_contained(defs: &Definitions, scope: Scope, ids: &[String]) -> Result<()> {
    for id in ids {
        if defs.scope_of(id) != Some(scope) {
            return Err(coded(
                ErrorCode::ContainedPermissionNotFound,
                format!("No {} permission {id} exists.", scope.as_str()),
                json!({ "permission_id": id }),
            ));
        }
    }
    Ok(())
}

/// A definition change as sent (`None`: not sent).
#[derive(Debug, Default)]
pub struct Change {
    pub id: Option<String>,
    pub description: Option<Option<String>>,
    pub contained: Option<Vec<String>>,
}

impl Change {
    pub fn parse(body: &Value, creating: bool) -> Result<Self> {
        let Value::Object(map) = body else {
            return Err(Error::Invalid("the body must be a JSON object".into()));
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !["id", "description", "contained_permission_ids"].contains(k))
            .collect();
        if !unknown.is_empty() {
            return Err(Error::Invalid(format!(
                "body contains unknown properties: {}",
                unknown.join(", ")
            )));
        }
        let id = match map.get("id") {
            None if creating => return Err(Error::Invalid("id is required".into())),
            None => None,
            Some(v) => Some(
                v.as_str()
                    .ok_or_else(|| Error::Invalid("id must be a string".into()))?
                    .to_owned(),
            ),
        };
        let description = match map.get("description") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => Some(Some(
                v.as_str()
                    .ok_or_else(|| Error::Invalid("description must be a string".into()))?
                    .to_owned(),
            )),
        };
        let contained = match map.get("contained_permission_ids") {
            None => None,
            Some(v) => Some(
                v.as_array()
                    .ok_or_else(|| {
                        Error::Invalid("contained_permission_ids must be an array".into())
                    })?
                    .iter()
                    .map(|x| {
                        x.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| Error::Invalid("contained ids must be strings".into()))
                    })
                    .collect::<Result<Vec<_>>>()?,
            ),
        };
        Ok(Self {
            id,
            description,
            contained,
        })
    }
}

pub async fn list(store: &Store, project: Uuid, scope: Scope) -> Result<Vec<Value>> {
    let defs = Definitions::load(store, project).await?;
    let mut all: Vec<Definition> = defs.0.into_iter().filter(|d| d.scope == scope).collect();
    if scope == Scope::Team {
        all.extend(SYSTEM.iter().map(|(id, description)| Definition {
            id: (*id).into(),
            scope,
            description: Some((*description).into()),
            contained: Vec::new(),
        }));
    }
    all.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(all.iter().map(to_json).collect())
}

pub async fn create(store: &Store, project: Uuid, scope: Scope, change: Change) -> Result<Value> {
    let id = change.id.unwrap_or_default();
    custom_id(&id)?;
    let mut defs = Definitions::load(store, project).await?;
    if defs.scope_of(&id).is_some() {
        return Err(taken(&id));
    }
    let contained = change.contained.unwrap_or_default();
    check_contained(&defs, scope, &contained)?;
    let def = Definition {
        id,
        scope,
        description: change.description.flatten(),
        contained,
    };
    defs.0.push(def.clone());
    store
        .save_definitions(
            project,
            &defs.0.iter().map(Definition::to_row).collect::<Vec<_>>(),
            None,
            None,
        )
        .await?;
    Ok(to_json(&def))
}

pub async fn update(
    store: &Store,
    project: Uuid,
    scope: Scope,
    id: &str,
    change: Change,
) -> Result<Value> {
    let mut defs = Definitions::load(store, project).await?;
    let Some(pos) = defs.0.iter().position(|d| d.id == id && d.scope == scope) else {
        return Err(not_found(id));
    };
    let mut def = defs.0[pos].clone();
    if let Some(contained) = change.contained {
        check_contained(&defs, scope, &contained)?;
        def.contained = contained;
    }
    if let Some(description) = change.description {
        def.description = description;
    }
    let mut renamed = None;
    if let Some(new_id) = change.id.filter(|n| n != id) {
        custom_id(&new_id)?;
        if defs.scope_of(&new_id).is_some() {
            return Err(taken(&new_id));
        }
        for other in &mut defs.0 {
            for c in &mut other.contained {
                if c == id {
                    c.clone_from(&new_id);
                }
            }
        }
        def.id.clone_from(&new_id);
        renamed = Some(new_id);
    }
    defs.0[pos] = def.clone();
    let rows: Vec<_> = defs.0.iter().map(Definition::to_row).collect();
    store
        .save_definitions(project, &rows, renamed.as_deref().map(|n| (id, n)), None)
        .await?;
    Ok(to_json(&def))
}

pub async fn delete(store: &Store, project: Uuid, scope: Scope, id: &str) -> Result<()> {
    let mut defs = Definitions::load(store, project).await?;
    if !defs.0.iter().any(|d| d.id == id && d.scope == scope) {
        return Err(not_found(id));
    }
    defs.0.retain(|d| d.id != id);
    for other in &mut defs.0 {
        other.contained.retain(|c| c != id);
    }
    let rows: Vec<_> = defs.0.iter().map(Definition::to_row).collect();
    store
        .save_definitions(project, &rows, None, Some(id))
        .await?;
    Ok(())
}
