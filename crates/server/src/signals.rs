//! The signals a server stops on.

/// Resolves with the exit code of the first SIGINT (130) or SIGTERM (143).
pub async fn signal() -> i32 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => 130,
                _ = term.recv() => 143,
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                130
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        130
    }
}
