//! `web_fetch` and `web_search`.
//!
//! Without a gateway, `web_fetch` fetches directly: it resolves the host itself,
//! asks the gate to judge the addresses (the SSRF guard), pins the connection to
//! exactly those addresses (no second lookup can rebind the name), ignores proxy
//! variables, and follows redirects by hand, asking the gate again for every hop
//! (at most [`MAX_REDIRECTS`]). Bodies are read up to a size cap; HTML is reduced
//! to readable text by [`html_to_text`].
//!
//! With `web.gateway_url` set, both tools go through the gateway instead, with
//! `Authorization: Bearer <token>` from the variable `web.gateway_token_env`
//! names. The gateway protocol is ours, kept minimal:
//!
//! - `POST {gateway}/fetch` with `{"url": "…"}`: the gateway answers with the
//!   fetched document as its body, passing the upstream `Content-Type` through
//!   (a non-2xx status is reported to the model with the body);
//! - `POST {gateway}/search` with `{"query": "…", "max_results": n}`: the gateway
//!   answers `{"results": [{"title", "url", "snippet"}]}` (any other body is
//!   shown as text).
//!
//! `web_search` without a gateway is a tool error: there is no search backend to
//! call directly.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use url::Url;

use super::{fit, human_bytes};
use crate::policy::Gate;
use crate::policy::web::UrlVerdict;
use crate::{Denial, ToolOutput};

/// Redirect hops followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

const USER_AGENT: &str = concat!("agentfile/", env!("CARGO_PKG_VERSION"));

/// Where web calls go.
#[derive(Debug, Clone)]
pub struct WebClient {
    gateway: Option<Gateway>,
    timeout: Duration,
    /// Bytes of a response downloaded at most.
    max_bytes: usize,
    /// Bytes of text handed back at most, notes included.
    result_cap: usize,
}

#[derive(Clone)]
struct Gateway {
    url: Url,
    token: Option<String>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Gateway")
            .field("url", &self.url.as_str())
            .finish()
    }
}

impl WebClient {
    /// `gateway`: `web.gateway_url` and the token read from the variable
    /// `web.gateway_token_env` names.
    pub fn new(
        gateway: Option<(Url, Option<String>)>,
        timeout: Duration,
        max_bytes: usize,
    ) -> WebClient {
        WebClient {
            gateway: gateway.map(|(url, token)| Gateway { url, token }),
            timeout,
            max_bytes,
            result_cap: usize::MAX,
        }
    }

    /// Fit what `web_fetch` returns in `cap` bytes, with notes that say how
    /// large the page and its text really were (see [`super::fit`]).
    pub fn with_result_cap(mut self, cap: usize) -> WebClient {
        self.result_cap = cap;
        self
    }

    /// Fetch `url` (already judged: `verdict`). A redirect or resolved address
    /// the policy refuses is a [`Denial`].
    pub async fn fetch(
        &self,
        gate: &Gate,
        url: Url,
        verdict: UrlVerdict,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, Denial> {
        let work = async {
            match &self.gateway {
                Some(g) => Ok(self.fetch_via_gateway(g, &url).await),
                None => self.fetch_direct(gate, url, verdict).await,
            }
        };
        tokio::select! {
            r = work => r,
            _ = cancel.cancelled() => Ok(ToolOutput::error("cancelled")),
        }
    }

    async fn fetch_direct(
        &self,
        gate: &Gate,
        mut url: Url,
        mut verdict: UrlVerdict,
    ) -> Result<ToolOutput, Denial> {
        for _hop in 0..=MAX_REDIRECTS {
            let port = url.port_or_known_default().unwrap_or(80);
            let addrs: Vec<SocketAddr> = match url.host() {
                Some(url::Host::Ipv4(a)) => vec![SocketAddr::new(IpAddr::V4(a), port)],
                Some(url::Host::Ipv6(a)) => vec![SocketAddr::new(IpAddr::V6(a), port)],
                Some(url::Host::Domain(d)) => {
                    match tokio::net::lookup_host((d.trim_end_matches('.'), port)).await {
                        Ok(it) => it.collect(),
                        Err(e) => {
                            return Ok(ToolOutput::error(format!(
                                "cannot resolve `{}`: {e}",
                                verdict.host
                            )));
                        }
                    }
                }
                None => return Ok(ToolOutput::error(format!("`{url}` has no host"))),
            };
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            gate.check_addrs(&verdict, &ips)?;
            agentfile_llm::install_tls();
            let mut builder = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .timeout(self.timeout)
                .user_agent(USER_AGENT);
            if let Some(url::Host::Domain(d)) = url.host() {
                // Connect to exactly the addresses judged above.
                builder = builder.resolve_to_addrs(d, &addrs);
            }
            let client = match builder.build() {
                Ok(c) => c,
                Err(e) => {
                    return Ok(ToolOutput::error(format!(
                        "cannot build an HTTP client: {e}"
                    )));
                }
            };
            let resp = match client.get(url.clone()).send().await {
                Ok(r) => r,
                Err(e) => {
                    return Ok(ToolOutput::error(format!(
                        "fetching `{url}` failed: {}",
                        error_chain(&e)
                    )));
                }
            };
            let status = resp.status();
            if status.is_redirection() {
                let Some(loc) = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                else {
                    return Ok(ToolOutput::error(format!(
                        "`{url}` answered {status} without a Location"
                    )));
                };
                let next = match url.join(loc) {
                    Ok(n) => n,
                    Err(e) => {
                        return Ok(ToolOutput::error(format!(
                            "`{url}` redirected to an invalid location `{loc}`: {e}"
                        )));
                    }
                };
                verdict = gate.check_url(&next)?;
                url = next;
                continue;
            }
            return Ok(self.render(resp, &url).await);
        }
        Ok(ToolOutput::error(format!(
            "more than {MAX_REDIRECTS} redirects; stopped at `{url}`"
        )))
    }

    /// The page through the gateway. What the model reads names the page,
    /// never the gateway: the gateway is plumbing the operator set up, and its
    /// URL would only mislead (the model would fetch it, or report it).
    async fn fetch_via_gateway(&self, g: &Gateway, url: &Url) -> ToolOutput {
        let endpoint = match join_endpoint(&g.url, "fetch") {
            Ok(e) => e,
            Err(e) => return ToolOutput::error(format!("fetching `{url}`: {e}")),
        };
        let resp = match self
            .gateway_post(g, endpoint, json!({"url": url.as_str()}))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return ToolOutput::error(format!(
                    "fetching `{url}` through the web gateway failed: {e}"
                ));
            }
        };
        self.render(resp, url).await
    }

    async fn gateway_post(
        &self,
        g: &Gateway,
        endpoint: Url,
        body: Value,
    ) -> Result<reqwest::Response, GatewayError> {
        agentfile_llm::install_tls();
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .user_agent(USER_AGENT)
            .build()
            .map_err(GatewayError::Client)?;
        let mut req = client.post(endpoint).json(&body);
        if let Some(t) = &g.token {
            req = req.bearer_auth(t);
        }
        // Without the endpoint's URL: the caller says what was asked for.
        req.send()
            .await
            .map_err(|e| GatewayError::NoAnswer(error_chain(&e.without_url())))
    }

    /// `web_search` through the gateway.
    pub async fn search(
        &self,
        query: &str,
        max_results: u64,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let Some(g) = &self.gateway else {
            return ToolOutput::error(
                "web_search needs a web gateway (web.gateway_url in the config); none is configured",
            );
        };
        let work = async {
            let endpoint = join_endpoint(&g.url, "search")?;
            let resp = self
                .gateway_post(
                    g,
                    endpoint,
                    json!({"query": query, "max_results": max_results}),
                )
                .await?;
            let status = resp.status();
            let (body, _) = read_capped(resp, self.max_bytes).await?;
            let text = String::from_utf8_lossy(&body).into_owned();
            if !status.is_success() {
                return Err(GatewayError::Status {
                    status,
                    body: text.trim().to_owned(),
                });
            }
            Ok(format_results(&text, max_results))
        };
        tokio::select! {
            r = work => match r {
                Ok(t) => ToolOutput::ok(t),
                Err(e) => ToolOutput::error(e.to_string()),
            },
            _ = cancel.cancelled() => ToolOutput::error("cancelled"),
        }
    }

    /// The answer for the model. `url` is the page asked for (after
    /// redirects), also when the response came through the gateway.
    async fn render(&self, resp: reqwest::Response, url: &Url) -> ToolOutput {
        let status = resp.status();
        let length = resp.content_length();
        let ctype = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let (body, more) = match read_capped(resp, self.max_bytes).await {
            Ok(b) => b,
            Err(e) => return ToolOutput::error(format!("reading `{url}` failed: {e}")),
        };
        let downloaded = body.len() as u64 + more;
        let is_html = ctype.contains("html") || (ctype.is_empty() && looks_like_html(&body));
        let textual = is_html
            || ctype.starts_with("text/")
            || ctype.contains("json")
            || ctype.contains("xml")
            || ctype.contains("javascript")
            || ctype.is_empty();
        let mut text = format!("URL: {url}\nStatus: {}\n\n", status.as_u16());
        let mut notes = Vec::new();
        if !textual || body.contains(&0) {
            let size = match length {
                Some(n) => format!("{n} bytes"),
                None if more == 0 => format!("{downloaded} bytes"),
                None => format!("more than {downloaded} bytes"),
            };
            text.push_str(&format!(
                "[binary content ({}), {size}; not shown]",
                if ctype.is_empty() {
                    "unknown type"
                } else {
                    &ctype
                },
            ));
        } else {
            let raw = String::from_utf8_lossy(&body);
            if is_html {
                text.push_str(&html_to_text(&raw));
            } else {
                text.push_str(&raw);
            }
            if more > 0 {
                let of = match length {
                    Some(n) => format!("of its {n} bytes ({})", human_bytes(n)),
                    None => "(it is longer; its size was not given)".to_owned(),
                };
                notes.push(format!(
                    "[the download stopped after the first {} bytes of the page {of}; the text above comes from that part only]",
                    body.len()
                ));
            }
        }
        let content = fit(&text, &notes, self.result_cap, |shown, total| {
            format!(
                "[the page's text is {total} bytes ({}); only the first {shown} bytes are shown]",
                human_bytes(total as u64)
            )
        });
        ToolOutput {
            content,
            is_error: !status.is_success(),
            command: None,
        }
    }
}

/// What went wrong on the way to the gateway or back. The text is part of the
/// tool's answer, after what was asked for (`fetching `…`: `).
#[derive(Debug, thiserror::Error)]
enum GatewayError {
    #[error("web.gateway_url is not usable: {0}")]
    Endpoint(url::ParseError),
    #[error("cannot build an HTTP client: {0}")]
    Client(reqwest::Error),
    /// The request failed: the error and its causes, `: `-joined.
    #[error("the web gateway did not answer: {0}")]
    NoAnswer(String),
    #[error("the web gateway answered {status}: {body}")]
    Status {
        status: reqwest::StatusCode,
        body: String,
    },
    #[error(transparent)]
    Body(#[from] BodyError),
}

/// A response body broke off: the error and its causes, `: `-joined.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BodyError(String);

fn join_endpoint(base: &Url, name: &str) -> Result<Url, GatewayError> {
    let mut s = base.as_str().to_owned();
    if !s.ends_with('/') {
        s.push('/');
    }
    Url::parse(&s)
        .and_then(|u| u.join(name))
        .map_err(GatewayError::Endpoint)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<(Vec<u8>, u64), BodyError> {
    let mut body = Vec::new();
    let mut more = 0u64;
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = cap.saturating_sub(body.len());
                if room == 0 {
                    more += chunk.len() as u64;
                    // Enough: stop downloading.
                    break;
                }
                let take = room.min(chunk.len());
                body.extend_from_slice(&chunk[..take]);
                more += (chunk.len() - take) as u64;
            }
            Ok(None) => break,
            Err(e) => return Err(BodyError(error_chain(&e))),
        }
    }
    Ok((body, more))
}

fn looks_like_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    head.contains("<html") || head.contains("<!doctype html")
}

fn format_results(body: &str, max: u64) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.trim().to_owned();
    };
    let Some(results) = v.get("results").and_then(Value::as_array) else {
        return body.trim().to_owned();
    };
    if results.is_empty() {
        return "no results".to_owned();
    }
    let mut out = String::new();
    for (i, r) in results.iter().take(max as usize).enumerate() {
        let field = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
                .to_owned()
        };
        out.push_str(&format!(
            "{}. {}\n   {}\n",
            i + 1,
            field("title"),
            field("url")
        ));
        let snippet = field("snippet");
        if !snippet.is_empty() {
            out.push_str(&format!("   {snippet}\n"));
        }
    }
    out.trim_end().to_owned()
}

/// Reduce HTML to readable text: scripts, styles and comments dropped, block
/// elements on their own lines, list items as `- `, common entities decoded,
/// whitespace collapsed. Tolerant of broken markup; never panics.
pub fn html_to_text(html: &str) -> String {
    const SKIP: &[&str] = &[
        "script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas",
    ];
    const BLOCK: &[&str] = &[
        "p",
        "div",
        "section",
        "article",
        "header",
        "footer",
        "nav",
        "main",
        "aside",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "ul",
        "ol",
        "table",
        "tr",
        "pre",
        "blockquote",
        "form",
        "hr",
        "dl",
        "dt",
        "dd",
        "figure",
        "figcaption",
        "body",
        "html",
        "title",
    ];
    let lower = html.to_ascii_lowercase();
    let mut out = String::with_capacity(html.len() / 2);
    if let Some(t) = extract_title(html, &lower) {
        out.push_str(&t);
        out.push_str("\n\n");
    }
    let mut i = 0;
    while i < html.len() {
        let rest = &html[i..];
        let lrest = &lower[i..];
        if lrest.starts_with("<!--") {
            i += lrest.find("-->").map_or(html.len() - i, |e| e + 3);
            continue;
        }
        if rest.starts_with('<') {
            let after = &lrest[1..];
            let closing = after.starts_with('/');
            let name_start = if closing { 2 } else { 1 };
            let name: String = lrest[name_start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let is_tag = !name.is_empty() || after.starts_with('!') || after.starts_with('?');
            if !is_tag {
                out.push('<');
                i += 1;
                continue;
            }
            let end = lrest.find('>').map_or(html.len(), |e| i + e + 1);
            if !closing && SKIP.contains(&name.as_str()) && !lrest[..end - i].ends_with("/>") {
                let close = format!("</{name}");
                i = match lower[end.min(html.len())..].find(&close) {
                    Some(c) => {
                        let from = end + c;
                        lower[from..].find('>').map_or(html.len(), |e| from + e + 1)
                    }
                    None => html.len(),
                };
                continue;
            }
            if name == "br" {
                out.push('\n');
            } else if name == "li" && !closing {
                out.push_str("\n- ");
            } else if name == "td" || name == "th" {
                out.push(' ');
            } else if BLOCK.contains(&name.as_str()) {
                out.push('\n');
            }
            i = end;
            continue;
        }
        if rest.starts_with('&') {
            let (decoded, used) = decode_entity(rest);
            out.push_str(&decoded);
            i += used;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    collapse_whitespace(&out)
}

fn extract_title(html: &str, lower: &str) -> Option<String> {
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let close = open_end + lower[open_end..].find("</title")?;
    let raw = html.get(open_end..close)?;
    let t = collapse_whitespace(&decode_all(raw));
    (!t.is_empty()).then_some(t)
}

fn decode_all(s: &str) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if rest.starts_with('&') {
            let (d, used) = decode_entity(rest);
            out.push_str(&d);
            i += used;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Decode the entity at the start of `s` (which starts with `&`); returns the
/// text and how many bytes were used. Unknown entities stay as they are.
fn decode_entity(s: &str) -> (String, usize) {
    let end = s
        .char_indices()
        .take(12)
        .find(|(_, c)| *c == ';')
        .map(|(i, _)| i);
    let Some(end) = end else {
        return ("&".to_owned(), 1);
    };
    let name = &s[1..end];
    let decoded = if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => num.parse::<u32>().ok(),
        };
        code.and_then(char::from_u32).map(|c| c.to_string())
    } else {
        let c = match name {
            "amp" => "&",
            "lt" => "<",
            "gt" => ">",
            "quot" => "\"",
            "apos" => "'",
            "nbsp" => " ",
            "mdash" => "—",
            "ndash" => "–",
            "hellip" => "…",
            "copy" => "©",
            "reg" => "®",
            "trade" => "™",
            "lsquo" => "‘",
            "rsquo" => "’",
            "ldquo" => "“",
            "rdquo" => "”",
            "laquo" => "«",
            "raquo" => "»",
            "bull" => "•",
            "middot" => "·",
            "times" => "×",
            "euro" => "€",
            _ => "",
        };
        (!c.is_empty()).then(|| c.to_owned())
    };
    match decoded {
        Some(d) => (d, end + 1),
        None => ("&".to_owned(), 1),
    }
}

fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank_run = 0;
    for line in s.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            blank_run += 1;
            if blank_run == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank_run = 0;
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_text() {
        let html = r#"<!doctype html><html><head><title>The &amp; Title</title>
            <style>body{color:red}</style><script>alert("x<y")</script></head>
            <body><h1>Hello&nbsp;world</h1><p>One <b>bold</b> word &lt;here&gt;.</p>
            <!-- hidden --><ul><li>first</li><li>second &#x2603; &#9731;</li></ul>
            a < b and c &unknown; d<br>e</body></html>"#;
        let t = html_to_text(html);
        assert!(t.starts_with("The & Title"), "{t}");
        assert!(t.contains("Hello world"), "{t}");
        assert!(t.contains("One bold word <here>."), "{t}");
        assert!(t.contains("- first\n- second ☃ ☃"), "{t}");
        assert!(t.contains("a < b and c &unknown; d\ne"), "{t}");
        assert!(
            !t.contains("alert") && !t.contains("color") && !t.contains("hidden"),
            "{t}"
        );
    }

    #[test]
    fn broken_markup_does_not_panic() {
        for s in [
            "<",
            "<script>",
            "&",
            "&#xZZ;",
            "<a href='x",
            "<!--",
            "é<p>ü",
            "<title>",
            "&#1114112;",
        ] {
            let _ = html_to_text(s);
        }
    }

    #[test]
    fn search_results_are_listed() {
        let body = r#"{"results":[{"title":"Rust","url":"https://rust-lang.org","snippet":"A language"}]}"#;
        assert_eq!(
            format_results(body, 5),
            "1. Rust\n   https://rust-lang.org\n   A language"
        );
        assert_eq!(format_results("plain", 5), "plain");
    }
}
