//! Hearing other processes' appends: every append's transaction ends with a
//! `NOTIFY agentfile_events, '<session id>'` (PostgreSQL delivers it only if
//! the transaction commits, and only after), and one connection per store,
//! opened when the first follower [watches](crate::SessionStore::watch), sits
//! in `LISTEN agentfile_events` and wakes the session's watches.
//!
//! What it is not: a copy of the events. A notification carries the session
//! id alone (far below PostgreSQL's 8,000-byte payload limit); followers read
//! the store. When the listening connection drops it is opened again with
//! exponential backoff, and every watch is woken once `LISTEN` is back,
//! because appends made meanwhile went unheard.
//!
//! The same connection listens on `agentfile_requests`, where a process asks
//! the one holding a run to approve or cancel it ([`RunRequest`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::{Either, select};
use tokio_postgres::{AsyncMessage, NoTls};

use crate::changes::{Changes, RunRequest};

/// The channel appends notify on.
pub(super) const CHANNEL: &str = "agentfile_events";
/// The channel requests to runs go on ([`crate::changes::RunRequest`], as JSON).
pub(super) const REQUESTS: &str = "agentfile_requests";

/// The first wait before listening again after the connection dropped.
const FIRST_DELAY: Duration = Duration::from_millis(50);
/// The longest wait between attempts.
const MAX_DELAY: Duration = Duration::from_secs(5);

/// `NOTIFY` statements for `ids`, to run just before the `COMMIT` of the
/// transaction that appended to them (one round trip with it). Ids are
/// inlined because `NOTIFY` takes no parameters; a session id holds only
/// ASCII letters, digits, `-` and `_` ([`crate::is_valid_id`]), and any
/// other is left out rather than quoted.
pub(super) fn notify_sql<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    ids.filter(|id| crate::is_valid_id(id))
        .map(|id| format!("NOTIFY {CHANNEL}, '{id}'; "))
        .collect()
}

/// Listen for as long as the store's connection thread runs (the task is
/// dropped with its runtime), connecting again whenever the connection is
/// lost. `target` names the server in logs, without the password.
pub(super) async fn listen(config: tokio_postgres::Config, target: String, changes: Arc<Changes>) {
    let mut delay = FIRST_DELAY;
    loop {
        if let Err(e) = listen_once(&config, &changes, &mut delay).await {
            tracing::warn!(
                "session store {target}: the connection that hears other processes' events \
                 failed ({e}); followers of runs elsewhere read the store every second until \
                 it is back"
            );
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_DELAY);
    }
}

/// One listening connection, from connecting to its end. `delay` goes back
/// to its first value once `LISTEN` is in force.
async fn listen_once(
    config: &tokio_postgres::Config,
    changes: &Changes,
    delay: &mut Duration,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    // The connection must be driven for `LISTEN` to complete.
    let sql = format!("LISTEN {CHANNEL}; LISTEN {REQUESTS}");
    let listen = client.batch_execute(&sql);
    futures::pin_mut!(listen);
    loop {
        match select(listen.as_mut(), messages.next()).await {
            Either::Left((done, _)) => {
                done?;
                break;
            }
            Either::Right((Some(message), _)) => deliver(message?, changes),
            Either::Right((None, _)) => return Ok(()),
        }
    }
    *delay = FIRST_DELAY;
    // Appends made before `LISTEN` took effect were not heard.
    changes.wake_all();
    while let Some(message) = messages.next().await {
        deliver(message?, changes);
    }
    Ok(())
}

fn deliver(message: AsyncMessage, changes: &Changes) {
    let AsyncMessage::Notification(n) = message else {
        return;
    };
    match n.channel() {
        CHANNEL => changes.wake(n.payload()),
        // Anyone who can write the store can send one; a payload that is not
        // a request is dropped.
        REQUESTS => match serde_json::from_str::<RunRequest>(n.payload()) {
            Ok(request) => changes.request(request),
            Err(e) => tracing::debug!(error = %e, "not a run request; dropped"),
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_names_each_valid_session() {
        assert_eq!(
            notify_sql(["a-1", "b_2"].into_iter()),
            "NOTIFY agentfile_events, 'a-1'; NOTIFY agentfile_events, 'b_2'; "
        );
        assert_eq!(notify_sql(["x'; DROP TABLE events; --"].into_iter()), "");
    }
}
