//! One-time verification codes (70 §4): 45 characters of Crockford base32, stored hashed,
//! looked up by (project, value) and kind, evaluated in the order of 70 §4.2, consumed once.

use serde_json::Value;
use uuid::Uuid;

use crate::clock::SharedClock;
use crate::crypto::{hash_secret, random_base32};
use crate::db::Database;
use crate::error::{CodedError, ErrorCode};

/// Length of every code; the last `NONCE_LEN` characters are its nonce.
pub const CODE_LEN: usize = 45;
const NONCE_LEN: usize = 39;
/// Attempts on a nonce after which even the right code is refused.
const MAX_ATTEMPTS: i32 = 20;

/// A pending code as listed by `pending`.
#[derive(Debug, Clone)]
pub struct Pending {
    pub id: Uuid,
    pub data: Value,
    pub expires_at_millis: i64,
}

/// A code found by `check`, with what it was issued for.
#[derive(Debug, Clone)]
pub struct Code {
    pub id: Uuid,
    pub data: Value,
    pub created_at_millis: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    #[error("code not found")]
    NotFound,
    #[error("code expired")]
    Expired,
    #[error("code already used")]
    AlreadyUsed,
    #[error("too many attempts")]
    MaxAttempts,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

impl From<CodeError> for CodedError {
    fn from(e: CodeError) -> Self {
        let (code, message) = match &e {
            CodeError::NotFound => (
                ErrorCode::VerificationCodeNotFound,
                "The code does not exist.",
            ),
            CodeError::Expired => (ErrorCode::VerificationCodeExpired, "The code has expired."),
            CodeError::AlreadyUsed => (
                ErrorCode::VerificationCodeAlreadyUsed,
                "The code was already used.",
            ),
            CodeError::MaxAttempts => (
                ErrorCode::VerificationCodeMaxAttemptsReached,
                "Too many attempts were made with this code.",
            ),
            CodeError::Db(err) => return CodedError::from_db(err, "codes"),
        };
        CodedError::new(code, message)
    }
}

/// The codes of one service's database.
#[derive(Clone)]
pub struct Codes {
    db: Database,
    clock: SharedClock,
}

fn nonce_of(code: &str) -> &str {
    &code[code.len().saturating_sub(NONCE_LEN)..]
}

impl Codes {
    pub fn new(db: Database, clock: SharedClock) -> Self {
        Self { db, clock }
    }

    /// Issues a code of `kind` valid for `ttl_millis`; returns the plaintext, which is never
    /// stored.
    pub async fn create(
        &self,
        project_id: Uuid,
        kind: &str,
        data: &Value,
        ttl_millis: i64,
    ) -> Result<String, CodeError> {
        Ok(self
            .create_with_id(project_id, kind, data, ttl_millis)
            .await?
            .1)
    }

    /// As `create`, also returning the code's id (invitations are listed and revoked by it).
    pub async fn create_with_id(
        &self,
        project_id: Uuid,
        kind: &str,
        data: &Value,
        ttl_millis: i64,
    ) -> Result<(Uuid, String), CodeError> {
        let code = random_base32(CODE_LEN);
        let id = Uuid::now_v7();
        let now = self.clock.now_millis();
        let sql =
            "INSERT INTO verification_codes (project_id, id, kind, code_hash, nonce_hash, data, \
                   created_at_millis, expires_at_millis) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
        crate::with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(project_id)
            .bind(id)
            .bind(kind)
            .bind(hash_secret(&code))
            .bind(hash_secret(nonce_of(&code)))
            .bind(data.to_string())
            .bind(now)
            .bind(now.saturating_add(ttl_millis))
            .execute(pool)
            .await
            .map(drop))?;
        Ok((id, code))
    }

    /// Unused, unexpired codes of `kind`, oldest first, with their ids and expiry.
    pub async fn pending(&self, project_id: Uuid, kind: &str) -> Result<Vec<Pending>, CodeError> {
        let sql = "SELECT id, data, expires_at_millis FROM verification_codes \
                   WHERE project_id = $1 AND kind = $2 AND used_at_millis IS NULL AND expires_at_millis > $3 \
                   ORDER BY created_at_millis, id";
        let now = self.clock.now_millis();
        let rows: Vec<(Uuid, String, i64)> = crate::with_pool!(&self.db, pool => sqlx::query_as(sql)
            .bind(project_id).bind(kind).bind(now).fetch_all(pool).await?);
        Ok(rows
            .into_iter()
            .map(|(id, data, expires_at_millis)| Pending {
                id,
                data: serde_json::from_str(&data).unwrap_or(Value::Null),
                expires_at_millis,
            })
            .collect())
    }

    /// Deletes a code by id (revocation); false when there was none of that kind.
    pub async fn delete(&self, project_id: Uuid, kind: &str, id: Uuid) -> Result<bool, CodeError> {
        let sql = "DELETE FROM verification_codes WHERE project_id = $1 AND kind = $2 AND id = $3";
        let done = crate::with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(project_id).bind(kind).bind(id).execute(pool).await?.rows_affected());
        Ok(done > 0)
    }

    /// Steps 1–5 of 70 §4.2: counts the attempt on the nonce, then finds the code of `kind`
    /// and checks expiry, use and the attempt limit. Does not consume.
    pub async fn check(&self, project_id: Uuid, kind: &str, code: &str) -> Result<Code, CodeError> {
        // Issued codes are ASCII; anything else names no code (and must not be sliced by bytes).
        if !code.is_ascii() {
            return Err(CodeError::NotFound);
        }
        let code = code.to_ascii_lowercase();
        let now = self.clock.now_millis();
        type Row = (Uuid, String, String, i64, Option<i64>, i32, i64);
        // The increment comes first: on SQLite a transaction that reads before it writes can
        // fail to upgrade its lock under concurrent writers, while one that starts by writing
        // waits its turn. The attempt counts even when the code turns out wrong.
        let found: Option<Row> = crate::with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("UPDATE verification_codes SET attempts = attempts + 1 WHERE project_id = $1 AND nonce_hash = $2")
                .bind(project_id)
                .bind(hash_secret(nonce_of(&code)))
                .execute(&mut *tx)
                .await?;
            let row: Option<Row> = sqlx::query_as(
                "SELECT id, kind, data, expires_at_millis, used_at_millis, attempts, created_at_millis \
                 FROM verification_codes WHERE project_id = $1 AND code_hash = $2",
            )
            .bind(project_id)
            .bind(hash_secret(&code))
            .fetch_optional(&mut *tx)
            .await?;
            tx.commit().await?;
            row
        });
        let Some((id, found_kind, data, expires, used, attempts, created)) = found else {
            return Err(CodeError::NotFound);
        };
        if found_kind != kind {
            return Err(CodeError::NotFound);
        }
        if expires <= now {
            return Err(CodeError::Expired);
        }
        if used.is_some() {
            return Err(CodeError::AlreadyUsed);
        }
        // `attempts` includes this request's increment; the rule reads the count before it,
        // so "at least 20 before" is "more than 20 now".
        if attempts > MAX_ATTEMPTS {
            return Err(CodeError::MaxAttempts);
        }
        Ok(Code {
            id,
            data: serde_json::from_str(&data).unwrap_or(Value::Null),
            created_at_millis: created,
        })
    }

    /// Marks a checked code used; fails if a concurrent request consumed it first.
    pub async fn consume(&self, project_id: Uuid, code: &Code) -> Result<(), CodeError> {
        let now = self.clock.now_millis();
        let sql = "UPDATE verification_codes SET used_at_millis = $1 \
                   WHERE project_id = $2 AND id = $3 AND used_at_millis IS NULL";
        let done = crate::with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(now)
            .bind(project_id)
            .bind(code.id)
            .execute(pool)
            .await?
            .rows_affected());
        if done == 1 {
            Ok(())
        } else {
            Err(CodeError::AlreadyUsed)
        }
    }
}

/// Appends or replaces `code=<code>` on a callback URL (70 §4).
pub fn link(callback_url: &str, code: &str) -> String {
    match url::Url::parse(callback_url) {
        Ok(mut url) => {
            let pairs: Vec<(String, String)> = url
                .query_pairs()
                .filter(|(k, _)| k != "code")
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            url.query_pairs_mut()
                .clear()
                .extend_pairs(pairs)
                .append_pair("code", code);
            url.to_string()
        }
        Err(_) => callback_url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn link_replaces_an_existing_code() {
        assert_eq!(
            super::link("https://a.example/cb?x=1&code=old", "new"),
            "https://a.example/cb?x=1&code=new"
        );
        assert_eq!(
            super::link("https://a.example/cb", "c"),
            "https://a.example/cb?code=c"
        );
    }
}
