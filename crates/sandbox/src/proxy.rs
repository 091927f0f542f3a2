//! The egress proxy: the one way out of a sandbox's network namespace.
//!
//! It serves a listener made inside the sandbox (so only that sandbox can
//! reach it) from this process, outside. It speaks HTTP/1.1 proxying:
//! `CONNECT host:port` for TLS and anything else, and plain `http://` requests
//! in absolute form. Each host is judged by the caller's [`Check`] (the web
//! policy's host rules and its checks of private addresses); the connection
//! then goes to the address the check resolved and approved, never to a name
//! resolved again (no DNS rebinding). A refusal is a `403` whose body gives
//! the rule.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Judge a host and port: the address to connect to, or why not.
pub type Check =
    Arc<dyn Fn(String, u16) -> BoxFuture<'static, Result<SocketAddr, Refusal>> + Send + Sync>;

/// Why a check refused a host: the body of the `403` the sandboxed client
/// reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// The longest request head read.
const MAX_HEAD: usize = 32 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to an approved address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Serve `listener` as the proxy until the handle is aborted.
pub fn serve(listener: std::net::TcpListener, check: Check) -> std::io::Result<JoinHandle<()>> {
    accept_loop(listener, move |stream| {
        let check = check.clone();
        async move {
            let _ = handle(stream, check).await;
        }
    })
}

/// Splice every connection to `listener` to `127.0.0.1:port` on this side,
/// until the handle is aborted.
pub fn forward(listener: std::net::TcpListener, port: u16) -> std::io::Result<JoinHandle<()>> {
    accept_loop(listener, move |mut inside| async move {
        if let Ok(mut outside) = TcpStream::connect(("127.0.0.1", port)).await {
            let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
        }
    })
}

/// Accept connections until aborted, each served by `serve` on a task of
/// its own (aborted with the loop).
fn accept_loop<F, Fut>(listener: std::net::TcpListener, serve: F) -> std::io::Result<JoinHandle<()>>
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    Ok(tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        conns.spawn(serve(stream));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    }))
}

/// A parsed request head.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// `CONNECT host:port`.
    Tunnel { host: String, port: u16 },
    /// A plain HTTP request to `host:port`, with its head rewritten to
    /// origin form.
    Plain {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Read and parse a request head: the target, or a status and a reason.
pub fn parse_head(head: &[u8]) -> Result<Target, (u16, String)> {
    let text =
        std::str::from_utf8(head).map_err(|_| (400, "the request head is not UTF-8".to_owned()))?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err((400, format!("not an HTTP request line: {first:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err((400, format!("unsupported protocol {version:?}")));
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_host_port(target, None)
            .ok_or_else(|| (400, format!("CONNECT needs host:port, not {target:?}")))?;
        return Ok(Target::Tunnel { host, port });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err((
            400,
            format!(
                "a proxy request must name an http:// URL (use CONNECT for https), not {target:?}"
            ),
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err((400, "credentials in the URL are refused".to_owned()));
    }
    let (host, port) = split_host_port(authority, Some(80))
        .ok_or_else(|| (400, format!("bad host in {target:?}")))?;
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines {
        if line.is_empty() {
            break;
        }
        let name = line.split(':').next().unwrap_or_default().trim();
        if name.eq_ignore_ascii_case("proxy-connection")
            || name.eq_ignore_ascii_case("proxy-authorization")
            || name.eq_ignore_ascii_case("connection")
            || name.eq_ignore_ascii_case("keep-alive")
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    // One request per connection: a later request on it could name another host.
    out.push_str("Connection: close\r\n\r\n");
    Ok(Target::Plain {
        host,
        port,
        head: out.into_bytes(),
    })
}

fn split_host_port(s: &str, default: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = &rest[..end];
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default?,
            None => return None,
        };
        (host.to_owned(), port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), p.parse().ok()?),
            None => (s.to_owned(), default?),
        }
    };
    (!host.is_empty() && port != 0).then(|| (host.to_ascii_lowercase(), port))
}

async fn refuse(stream: &mut TcpStream, status: u16, reason: &str) -> std::io::Result<()> {
    let phrase = match status {
        403 => "Forbidden",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Bad Request",
    };
    let body = format!("agentfile sandbox proxy: {reason}\n");
    let msg = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(msg.as_bytes()).await?;
    stream.shutdown().await
}

async fn read_head(stream: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), (u16, String)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| (400, e.to_string()))?;
        if n == 0 {
            return Err((400, "the connection closed before a request".to_owned()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(i + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err((400, "the request head is too long".to_owned()));
        }
    }
}

async fn handle(mut stream: TcpStream, check: Check) -> std::io::Result<()> {
    let (head, early) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(h)) => h,
        Ok(Err((status, why))) => return refuse(&mut stream, status, &why).await,
        Err(_) => return Ok(()),
    };
    let target = match parse_head(&head) {
        Ok(t) => t,
        Err((status, why)) => return refuse(&mut stream, status, &why).await,
    };
    let (host, port) = match &target {
        Target::Tunnel { host, port } | Target::Plain { host, port, .. } => (host.clone(), *port),
    };
    let addr = match check(host.clone(), port).await {
        Ok(a) => a,
        Err(Refusal(why)) => return refuse(&mut stream, 403, &why).await,
    };
    let mut upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return refuse(
                &mut stream,
                502,
                &format!("cannot connect to {host}:{port}: {e}"),
            )
            .await;
        }
        Err(_) => {
            return refuse(
                &mut stream,
                504,
                &format!("connecting to {host}:{port} timed out"),
            )
            .await;
        }
    };
    match target {
        Target::Tunnel { .. } => {
            stream
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
        }
        Target::Plain { head, .. } => {
            upstream.write_all(&head).await?;
        }
    }
    if !early.is_empty() {
        upstream.write_all(&early).await?;
    }
    tokio::io::copy_bidirectional(&mut stream, &mut upstream).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Send `request` to a proxy whose check allows everything (to nowhere),
    /// and read the answer.
    async fn ask(request: Vec<u8>) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let check: Check = Arc::new(|_, _| {
            Box::pin(async { Err::<SocketAddr, _>(Refusal("no host is allowed".to_owned())) })
        });
        let task = serve(l, check).unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        // The proxy may answer before it has read everything.
        let _ = s.write_all(&request).await;
        let _ = s.shutdown().await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        task.abort();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn hostile_requests_get_an_answer_and_nothing_else() {
        let huge = format!(
            "GET http://x.com/ HTTP/1.1\r\nX: {}\r\n",
            "a".repeat(MAX_HEAD * 2)
        );
        assert!(
            ask(huge.into_bytes()).await.starts_with("HTTP/1.1 400 "),
            "a head past the cap"
        );
        let garbage = ask(b"\x00\xff\xfe nonsense\r\n\r\n".to_vec()).await;
        assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
        let https = ask(b"GET https://x.com/ HTTP/1.1\r\n\r\n".to_vec()).await;
        assert!(
            https.starts_with("HTTP/1.1 400 ") && https.contains("CONNECT"),
            "{https}"
        );
        let refused = ask(b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n".to_vec()).await;
        assert!(
            refused.starts_with("HTTP/1.1 403 ") && refused.contains("no host is allowed"),
            "{refused}"
        );
        // A client that closes at once leaves the proxy serving.
        let early = ask(Vec::new()).await;
        assert!(
            early.is_empty() || early.starts_with("HTTP/1.1 400 "),
            "{early}"
        );
    }

    #[test]
    fn heads_are_parsed_and_rewritten() {
        assert_eq!(
            parse_head(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
            Ok(Target::Tunnel {
                host: "example.com".into(),
                port: 443
            })
        );
        assert_eq!(
            parse_head(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"),
            Ok(Target::Tunnel {
                host: "::1".into(),
                port: 8443
            })
        );
        let Ok(Target::Plain { host, port, head }) = parse_head(
            b"GET http://Example.com/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n",
        ) else {
            panic!()
        };
        assert_eq!((host.as_str(), port), ("example.com", 80));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"
        );
        assert!(parse_head(b"GET https://x.com/ HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"GET http://u:p@x.com/ HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"CONNECT x.com HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"nonsense\r\n\r\n").is_err());
    }
}
