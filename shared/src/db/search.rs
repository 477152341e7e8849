//! Case-insensitive substring search answered from indexes, in id order, a page at a time:
//! the users list's `query` (display names in auth, contact values in contacts). User ids are
//! UUIDv7 minted from the sign-up instant, so id order is the list's sign-up order and each
//! service can answer its part of a page on its own.
//!
//! No single plan serves both kinds of text at a million rows: a common one ("user" in every
//! address) is found at once by walking the id index and checking each row, while a rare one
//! would make that walk read the whole project. So a search first walks two windows of rows in
//! id order (twice, then eight times the matches asked for); if they hold too few matches the
//! matches are rare, and the rest comes from the text index (PostgreSQL: `pg_trgm`; SQLite: an FTS5 `trigram` table), whose matches are few
//! by then. Text shorter than three characters has no trigrams to look up; it is served by
//! walking alone, which stops as soon as the page is full.

use uuid::Uuid;

use super::Database;

/// How many rows the walk reads before the text index takes over, as multiples of the matches
/// asked for: a first window that common text fills at once, then a larger one.
const WINDOWS: [usize; 2] = [2, 8];
/// Rows a window reads at least and at most.
const WINDOW_MIN: usize = 100;
const WINDOW_MAX: usize = 10_000;

/// Where a search or list page starts, in list order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    /// Nothing before the first row: `None`.
    pub id: Option<Uuid>,
    /// Whether `id` itself belongs to the page (a cursor) or only what follows it.
    pub inclusive: bool,
    /// Descending id order.
    pub desc: bool,
}

impl Start {
    pub fn first(desc: bool) -> Self {
        Self {
            id: None,
            inclusive: true,
            desc,
        }
    }

    /// A start as a gRPC request gives it: an optional id in text, whether the id itself is
    /// included, the direction.
    pub fn parse(from: Option<&str>, inclusive: bool, desc: bool) -> Result<Self, uuid::Error> {
        Ok(Self {
            id: from.map(Uuid::parse_str).transpose()?,
            inclusive,
            desc,
        })
    }

    /// The start right after `id`.
    pub fn after(id: Uuid, desc: bool) -> Self {
        Self {
            id: Some(id),
            inclusive: false,
            desc,
        }
    }

    /// `AND {column} >= $n`-style condition for this start (empty without an id).
    pub fn condition(&self, column: &str, param: usize) -> String {
        let cmp = match (self.desc, self.inclusive) {
            (false, true) => ">=",
            (false, false) => ">",
            (true, true) => "<=",
            (true, false) => "<",
        };
        match self.id {
            Some(_) => format!("AND {column} {cmp} ${param}"),
            None => String::new(),
        }
    }

    pub fn order(&self) -> &'static str {
        if self.desc {
            "DESC"
        } else {
            "ASC"
        }
    }

    /// Whether `id` lies at or after this start.
    pub fn admits(&self, id: Uuid) -> bool {
        match self.id {
            None => true,
            Some(from) if self.desc => id < from || (self.inclusive && id == from),
            Some(from) => id > from || (self.inclusive && id == from),
        }
    }
}

/// Ids in list order, and whether nothing follows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ids {
    pub ids: Vec<Uuid>,
    pub exhausted: bool,
}

/// Where one searchable text lives.
pub struct Searchable {
    /// Table and columns: the id the list is ordered by, and the text.
    pub table: &'static str,
    pub id: &'static str,
    pub text: &'static str,
    /// PostgreSQL: the expression the trigram index is on (`lower(display_name)`, `value`).
    pub indexed: &'static str,
    /// SQLite: the FTS5 trigram table and the table it indexes, whose `key` is the FTS rowid and
    /// which holds `project_id` and the id column.
    pub fts: &'static str,
    pub fts_rows: &'static str,
}

/// Up to `want` distinct ids of `project` whose text contains `text` (case-insensitive), from
/// `start` on in list order.
pub async fn matching(
    db: &Database,
    s: &Searchable,
    project: Uuid,
    text: &str,
    start: Start,
    want: usize,
) -> sqlx::Result<Ids> {
    // Within what SQL's LIMIT takes.
    let want = want.min(1 << 40);
    let needle = text.to_lowercase();
    let mut ids: Vec<Uuid> = Vec::new();
    let mut from = start;
    let mut walks = 0usize;
    loop {
        let factor = WINDOWS[walks.min(WINDOWS.len() - 1)];
        walks += 1;
        let window = (want * factor).clamp(WINDOW_MIN, WINDOW_MAX);
        let (found, last, walked_all) = walk(db, s, project, &needle, from, window).await?;
        ids.extend(found);
        if ids.len() >= want {
            ids.truncate(want);
            return Ok(Ids {
                ids,
                exhausted: false,
            });
        }
        let (Some(last), false) = (last, walked_all) else {
            return Ok(Ids {
                ids,
                exhausted: true,
            });
        };
        from = Start::after(last, start.desc);
        // Without trigrams to look up, walking goes on from where the window ended.
        if walks >= WINDOWS.len() && needle.chars().count() >= 3 {
            let asked = want - ids.len();
            let rest = indexed(db, s, project, &needle, from, asked).await?;
            let exhausted = rest.len() < asked;
            ids.extend(rest);
            return Ok(Ids { ids, exhausted });
        }
    }
}

/// One window of rows from `start`: the matches in it, its last id, and whether it reached the
/// end of the project.
async fn walk(
    db: &Database,
    s: &Searchable,
    project: Uuid,
    needle: &str,
    start: Start,
    window: usize,
) -> sqlx::Result<(Vec<Uuid>, Option<Uuid>, bool)> {
    let sql = format!(
        "SELECT {id}, {text} FROM {table} WHERE project_id = $1 {from} ORDER BY {id} {order} LIMIT {window}",
        id = s.id,
        text = s.text,
        table = s.table,
        from = start.condition(s.id, 2),
        order = start.order(),
    );
    let rows: Vec<(Uuid, Option<String>)> = crate::with_pool!(db, pool => {
        let mut query = sqlx::query_as(&sql).bind(project);
        if let Some(id) = start.id {
            query = query.bind(id);
        }
        query.fetch_all(pool).await?
    });
    let walked_all = rows.len() < window;
    let last = rows.last().map(|(id, _)| *id);
    let mut found: Vec<Uuid> = Vec::new();
    for (id, value) in rows {
        if value.is_some_and(|v| v.to_lowercase().contains(needle)) && found.last() != Some(&id) {
            found.push(id);
        }
    }
    Ok((found, last, walked_all))
}

/// Matches from the text index, from `start` on, at most `want`.
async fn indexed(
    db: &Database,
    s: &Searchable,
    project: Uuid,
    needle: &str,
    start: Start,
    want: usize,
) -> sqlx::Result<Vec<Uuid>> {
    let order = start.order();
    match db {
        Database::Postgres(pool) => {
            let from = start.condition("id", 3);
            // Materialised, so the planner answers the condition from the trigram index instead
            // of walking the id index (which the window above already found too sparse).
            let sql = format!(
                "WITH m AS MATERIALIZED (SELECT DISTINCT {id} AS id FROM {table} \
                 WHERE project_id = $1 AND {indexed} LIKE $2 ESCAPE '\\') \
                 SELECT id FROM m WHERE TRUE {from} ORDER BY id {order} LIMIT {want}",
                id = s.id,
                table = s.table,
                indexed = s.indexed,
            );
            let pattern = format!(
                "%{}%",
                needle
                    .replace('\\', "\\\\")
                    .replace('%', "\\%")
                    .replace('_', "\\_")
            );
            let mut query = sqlx::query_scalar(&sql).bind(project).bind(pattern);
            if let Some(id) = start.id {
                query = query.bind(id);
            }
            query.fetch_all(pool).await
        }
        Database::Sqlite(pool) => {
            // The matches first (the text index), then their rows by key.
            let sql = format!(
                "SELECT DISTINCT r.{id} AS id FROM {rows} r \
                 WHERE r.key IN (SELECT rowid FROM {fts} WHERE {fts} MATCH $2) \
                 AND r.project_id = $1 {from} ORDER BY r.{id} {order} LIMIT {want}",
                id = s.id,
                fts = s.fts,
                rows = s.fts_rows,
                from = start.condition(&format!("r.{}", s.id), 3),
            );
            // One phrase: with the trigram tokenizer, the substring itself.
            let phrase = format!("\"{}\"", needle.replace('"', "\"\""));
            let mut query = sqlx::query_scalar(&sql).bind(project).bind(phrase);
            if let Some(id) = start.id {
                query = query.bind(id);
            }
            query.fetch_all(pool).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_admit_what_follows_them_in_list_order() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        assert!(Start::first(false).admits(a));
        assert!(Start::after(a, false).admits(b));
        assert!(!Start::after(a, false).admits(a));
        assert!(Start::after(b, true).admits(a));
        let cursor = Start {
            id: Some(b),
            inclusive: true,
            desc: false,
        };
        assert!(cursor.admits(b) && !cursor.admits(a));
        assert_eq!(cursor.condition("id", 2), "AND id >= $2");
        assert_eq!(Start::after(b, true).condition("id", 3), "AND id < $3");
    }
}
