//! Browsing a PostgreSQL store: the web view's pages of sessions, its filters
//! and search, each session's summary and the workflow names (CONTRACT §17,
//! §22), answered by indexed queries that read what the page shows, as
//! SQLite's do — never by listing every session.
//!
//! The rules are [`crate::browse`]'s: the same order (newest first, then by id
//! descending, bytes compared), the same cursor, the same matches. SQL narrows
//! to candidates and [`SessionQuery::matches`] decides, so both stores agree
//! row for row:
//!
//! - A status filter uses `sessions_by_status`; a filter on `queued`,
//!   `running` or `interrupted` reads the rows of all three (a stored
//!   `running` whose owner died reads `interrupted`), as `list` does.
//! - A workflow filter uses `sessions_by_workflow` (migration 7).
//! - The search looks for the text, lower-cased (ASCII letters only, as
//!   SQLite's `LIKE`), in [`SEARCH_TEXT`]: the id, the workflow name and the
//!   inputs' JSON text. When the server has `pg_trgm`, migration 7 gives that
//!   expression a trigram index, so a rare word is found without reading the
//!   table; without it (the extension missing, or not ours to create) the
//!   search reads rows newest first until the page is full, as SQLite does.
//!   A search statement is prepared afresh for each page, so the planner sees
//!   the word and chooses between the trigram index and the ordered scan.
//! - Rows SQL let through that the rules refuse (a word found in an input's
//!   name, a `running` session that reads `interrupted`) are skipped, and the
//!   next rows read after the last one seen, until the page is full.

use std::time::SystemTime;

use agentfile_wire::events::Usage;
use tokio_postgres::types::ToSql;

use super::{Conn, Failure, META_COLUMNS, Worker, raw_meta};
use crate::browse::{Cursor, SessionQuery, SessionSummary, like_pattern};
use crate::{SessionMeta, SessionStatus, StoreError, is_live};

/// What the search looks in: one expression, the same in the query and in
/// the trigram index of migration 7 (the planner matches them as text).
pub(super) const SEARCH_TEXT: &str =
    r#"lower((id || E'\n' || workflow || E'\n' || inputs) COLLATE "C")"#;

/// Indexes for the web view's filters and search (issue 49). The workflow
/// name is compared and sorted as bytes (`C`), like the other names, so its
/// index serves `workflow = $1` in the list's order and the names come back
/// sorted as SQLite sorts them. The trigram index is made only where
/// `pg_trgm` can be had (it ships with PostgreSQL; creating it needs the
/// `CREATE` privilege on the database): without it the search works the
/// same, by reading rows. Written to be applied again harmlessly.
pub(super) const MIGRATION_7: &str = r#"
ALTER TABLE sessions ALTER COLUMN workflow SET DATA TYPE TEXT COLLATE "C";
CREATE INDEX IF NOT EXISTS sessions_by_workflow ON sessions(workflow, created_at, id);
DO $migration$
DECLARE
    trgm_schema TEXT;
BEGIN
    BEGIN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'no pg_trgm (%): the session search reads rows', SQLERRM;
    END;
    SELECT n.nspname INTO trgm_schema
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'pg_trgm';
    IF trgm_schema IS NOT NULL THEN
        BEGIN
            EXECUTE format(
                $sql$CREATE INDEX IF NOT EXISTS sessions_by_text ON sessions
                     USING gin ((lower((id || E'\n' || workflow || E'\n' || inputs) COLLATE "C")) %I.gin_trgm_ops)$sql$,
                trgm_schema);
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'no trigram index (%): the session search reads rows', SQLERRM;
        END;
    END IF;
END
$migration$;
"#;

/// The statuses whose stored rows may read as another (see `list`).
const LIVE_ROWS: &str = "status IN ('queued', 'running', 'interrupted')";

impl Worker {
    /// A page of sessions (see [`crate::SessionStore::page`]).
    pub(super) async fn page(
        &self,
        c: &Conn,
        query: &SessionQuery,
    ) -> Result<Vec<SessionMeta>, Failure> {
        let limit = query.limit();
        let batch = i64::try_from(limit).unwrap_or(i64::MAX);
        let search = query
            .search()
            .map(|q| like_pattern(&q.to_ascii_lowercase()));
        let status = query.status.map(SessionStatus::as_str);
        let mut args: Vec<&(dyn ToSql + Sync)> = Vec::new();
        let mut filter = String::from("TRUE");
        match (query.status, &status) {
            (Some(s), _) if is_live(s) || s == SessionStatus::Interrupted => {
                filter.push_str(&format!(" AND {LIVE_ROWS}"));
            }
            (_, Some(s)) => {
                args.push(s);
                filter.push_str(&format!(" AND status = ${}", args.len()));
            }
            _ => {}
        }
        if let Some(w) = &query.workflow {
            args.push(w);
            filter.push_str(&format!(" AND workflow = ${}", args.len()));
        }
        if let Some(p) = &search {
            args.push(p);
            filter.push_str(&format!(" AND {SEARCH_TEXT} LIKE ${}", args.len()));
        }
        let n = args.len();
        // Two statements, with a cursor and without, rather than `$n IS NULL
        // OR …`, which a generic plan could not serve from the index.
        let first = format!(
            "{META_COLUMNS} WHERE {filter} ORDER BY created_at DESC, id DESC LIMIT ${}",
            n + 1
        );
        let after = format!(
            "{META_COLUMNS} WHERE {filter} AND (created_at, id) < (${}, ${}) \
             ORDER BY created_at DESC, id DESC LIMIT ${}",
            n + 1,
            n + 2,
            n + 3
        );
        let now = SystemTime::now();
        let mut cursor: Option<Cursor> = query.before.clone();
        let mut out = Vec::new();
        loop {
            let mut all = args.clone();
            let sql = match &cursor {
                Some(c) => {
                    all.extend([&c.created_at as &(dyn ToSql + Sync), &c.id, &batch]);
                    &after
                }
                None => {
                    all.push(&batch);
                    &first
                }
            };
            let rows = if search.is_some() {
                // Planned for this word: the trigram index or the ordered scan.
                c.client
                    .query(sql.as_str(), &all)
                    .await
                    .map_err(self.err("search sessions"))?
            } else {
                self.query(c, sql, &all, "page sessions").await?
            };
            for row in &rows {
                let meta = raw_meta(self, row)?.into_meta(now, |m| self.corrupt(m))?;
                cursor = Some(Cursor::after(&meta));
                if query.matches(&meta) {
                    out.push(meta);
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
            if rows.len() < limit {
                return Ok(out);
            }
        }
    }

    /// What a session's events add up to (see
    /// [`crate::browse::summarize`]): its first and last events read by the
    /// primary key, and only while it has not ended, the sums of what is
    /// stored so far.
    /// The principal of each of `ids`, in their order, from one query
    /// (`None` for a session that is gone).
    pub(super) async fn principals(
        &self,
        c: &Conn,
        ids: &[String],
    ) -> Result<Vec<Option<String>>, Failure> {
        let rows = self
            .query(
                c,
                "SELECT id, principal FROM sessions WHERE id = ANY($1)",
                &[&ids],
                "read the sessions' owners",
            )
            .await?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let id: String = self.get(row, 0)?;
            let principal: Option<String> = self.get(row, 1)?;
            found.insert(id, principal);
        }
        Ok(ids
            .iter()
            .map(|id| found.get(id).cloned().flatten())
            .collect())
    }

    /// The summary of each of `ids`, in their order (the default for a
    /// session that is gone). Sent together, the queries are pipelined on the
    /// one connection, so a page pays about one round trip.
    pub(super) async fn summaries(
        &self,
        c: &Conn,
        ids: &[String],
    ) -> Result<Vec<SessionSummary>, Failure> {
        let each = futures::future::join_all(ids.iter().map(|id| self.summary(c, id))).await;
        let mut out = Vec::with_capacity(each.len());
        for s in each {
            match s {
                Ok(s) => out.push(s),
                Err(Failure::Store(StoreError::NotFound(_))) => out.push(SessionSummary::default()),
                Err(f) => return Err(f),
            }
        }
        Ok(out)
    }

    pub(super) async fn summary(&self, c: &Conn, id: &str) -> Result<SessionSummary, Failure> {
        let row = self
            .query_opt(
                c,
                "SELECT \
                   (SELECT (data::json -> 'trigger')::text FROM events \
                    WHERE session_id = s.id AND seq = 1 AND type = 'run_started'), \
                   l.ts, l.type, \
                   CASE WHEN l.type IN ('run_complete', 'run_failed', 'run_cancelled', \
                                        'run_suspended') \
                        THEN (l.data::json -> 'usage')::text END \
                 FROM sessions s LEFT JOIN LATERAL \
                   (SELECT ts, type, data FROM events WHERE session_id = s.id \
                    ORDER BY seq DESC LIMIT 1) l ON TRUE \
                 WHERE s.id = $1",
                &[&id],
                "read the session's summary",
            )
            .await?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
        let trigger: Option<String> = self.get(&row, 0)?;
        let trigger = trigger
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|t| Some((t["id"].as_str()?.to_owned(), t["kind"].as_str()?.to_owned())));
        let last_ts: Option<String> = self.get(&row, 1)?;
        let Some(last_ts) = last_ts else {
            return Ok(SessionSummary::default());
        };
        let terminal: Option<String> = self.get(&row, 3)?;
        if let Some(usage) = terminal {
            return Ok(SessionSummary {
                trigger,
                ended_at: Some(last_ts),
                usage: serde_json::from_str(&usage).ok(),
            });
        }
        // Still going: what is stored so far.
        let row = self
            .query_opt(
                c,
                "SELECT count(*) FILTER (WHERE type = 'llm_response'), \
                   coalesce(sum((data::json ->> 'input_tokens')::bigint) \
                            FILTER (WHERE type = 'llm_response'), 0)::bigint, \
                   coalesce(sum((data::json ->> 'output_tokens')::bigint) \
                            FILTER (WHERE type = 'llm_response'), 0)::bigint, \
                   coalesce(sum((data::json ->> 'cost_usd')::float8) \
                            FILTER (WHERE type = 'llm_response'), 0)::float8, \
                   count(data::json ->> 'cost_usd') FILTER (WHERE type = 'llm_response'), \
                   count(*) FILTER (WHERE type = 'tool_call') \
                 FROM events WHERE session_id = $1",
                &[&id],
                "sum the session's usage",
            )
            .await?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
        let (turns, input, output): (i64, i64, i64) =
            (self.get(&row, 0)?, self.get(&row, 1)?, self.get(&row, 2)?);
        let (cost, priced, tools): (f64, i64, i64) =
            (self.get(&row, 3)?, self.get(&row, 4)?, self.get(&row, 5)?);
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        let usage = (turns > 0 || tools > 0).then(|| Usage {
            input_tokens: n(input),
            output_tokens: n(output),
            cost_usd: (priced == turns).then_some(cost),
            turns: n(turns),
            tool_calls: n(tools),
        });
        Ok(SessionSummary {
            trigger,
            ended_at: None,
            usage,
        })
    }

    /// The workflow names, sorted as bytes, at most 1,000: one probe of
    /// `sessions_by_workflow` per name (a loose index scan), not a read of
    /// every session.
    pub(super) async fn workflows(&self, c: &Conn) -> Result<Vec<String>, Failure> {
        let rows = self
            .query(
                c,
                "WITH RECURSIVE names(workflow) AS ( \
                   (SELECT workflow FROM sessions ORDER BY workflow LIMIT 1) \
                   UNION ALL \
                   SELECT (SELECT s.workflow FROM sessions s WHERE s.workflow > n.workflow \
                           ORDER BY s.workflow LIMIT 1) \
                   FROM names n WHERE n.workflow IS NOT NULL) \
                 SELECT workflow FROM names WHERE workflow IS NOT NULL LIMIT 1000",
                &[],
                "list workflows",
            )
            .await?;
        rows.iter().map(|r| self.get(r, 0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The planner matches an index's expression as written: the search
    /// must say exactly what migration 7 indexed.
    #[test]
    fn the_search_is_the_indexed_expression() {
        let indexed = format!("USING gin (({SEARCH_TEXT}) %I.gin_trgm_ops)");
        assert!(MIGRATION_7.contains(&indexed), "{indexed}");
    }
}
