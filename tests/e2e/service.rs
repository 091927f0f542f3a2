//! The run service (`crates/engine/src/service`) driven in-process through
//! the servers' gateway, for what the doors cannot time from outside: the
//! moment between a run's last stored event and the end of its task.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentfile::events::EventSink;
use agentfile::server::gateway::{Gateway, GatewayOptions};
use agentfile::service::RunHooks;
use agentfile::wire::events::{Event, EventBody};
use agentfile::wire::rpc::{RunParams, SignalParams};
use serde_json::json;

const SUSPENDS: &str = r#"---
name: Waits
id: waits
description: Wait for a release, then end with its channel.
version: 1.0.0
inputs: { type: object }
outputs:
  type: object
  properties: { channel: { type: string } }
steps:
  - id: wait-release
    kind: suspend
    resume:
      on: [release.tagged]
    next: $end
result:
  channel: $steps.wait-release.channel
---
# Waits

One suspend step, then the end.
"#;

/// Tells the test the run suspended, then holds the run's task a while
/// before it closes, as a slow exporter or a loaded machine would.
struct SlowAfterSuspend(Mutex<Option<tokio::sync::oneshot::Sender<()>>>);

impl EventSink for SlowAfterSuspend {
    fn send(&self, event: &Event) {
        if matches!(event.body, EventBody::RunSuspended { .. }) {
            if let Some(tx) = self.0.lock().unwrap().take() {
                let _ = tx.send(());
            }
            std::thread::sleep(Duration::from_millis(400));
        }
    }
}

/// A signal sent the moment `run_suspended` arrives, while the run's task
/// is still closing, resumes the session (it used to be refused as
/// "already running in this server", with the signal already recorded).
#[test]
fn a_signal_sent_as_the_run_suspends_resumes_it() {
    let dir = crate::support::tmp("service", "signal-as-suspended");
    write(&dir.join(".workflows/waits/WORKFLOW.md"), SUSPENDS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let gateway = Gateway::new(GatewayOptions {
            workspace: Some(dir.clone()),
            ..GatewayOptions::default()
        })
        .unwrap();
        let service = gateway.runs().clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let live = service
            .submit(
                RunParams {
                    path: ".workflows/waits".into(),
                    wait: Some(false),
                    ..RunParams::default()
                },
                RunHooks {
                    sinks: vec![Arc::new(SlowAfterSuspend(Mutex::new(Some(tx))))],
                    ..RunHooks::default()
                },
            )
            .await
            .unwrap();
        let id = live.session_id().to_owned();
        rx.await.unwrap();
        let resumed = service
            .signal(
                SignalParams {
                    session_id: id.clone(),
                    event: "release.tagged".into(),
                    payload: json!({"channel": "#releases"}),
                },
                RunHooks::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("the signal was refused: {}", e.message));
        assert_eq!(resumed.session_id, id);
        let store = service.store().unwrap();
        for _ in 0..200 {
            if store.get(&id).unwrap().status.as_str() == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let last = store.events(&id, 0).unwrap().pop().unwrap();
        match &last.body {
            EventBody::RunComplete { outputs, .. } => {
                assert_eq!(json!(outputs), json!({"channel": "#releases"}), "{last:?}")
            }
            other => panic!("the run did not complete: {other:?}"),
        }
    });
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
