//! RFC 9728 protected-resource metadata for `agentfile mcp --http` when it
//! takes bearer tokens (`AGENTFILE_MCP_TOKEN`): how a client learns to
//! authenticate.
//!
//! The document is served without a token at
//! `/.well-known/oauth-protected-resource/mcp` (the endpoint's path
//! appended, as RFC 9728 §3.1 builds it from the resource URL) and at
//! `/.well-known/oauth-protected-resource` (where clients look first when
//! they know only the host). It names the `resource` (the endpoint's URL:
//! `[mcp] resource_url`, else `http://<Host>/mcp` from the request), the one
//! way to present a token (`bearer_methods_supported: ["header"]`), and the
//! authorization servers that issue tokens when `[mcp] authorization_servers`
//! lists them. Every 401 points at it: `WWW-Authenticate: Bearer …,
//! resource_metadata="<the document's URL>"`.
//!
//! It is not an authorization server: tokens are still the configured ones,
//! compared by the HTTP front ([`super::http`]). Without tokens there is
//! nothing to learn, and the paths are 404.

use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use serde_json::{Value, json};

/// The well-known path of the metadata (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata of one endpoint.
pub struct Metadata {
    /// The endpoint's path (`/mcp`).
    endpoint: &'static str,
    /// `[mcp] authorization_servers`.
    authorization_servers: Vec<String>,
    /// `[mcp] resource_url`, parsed.
    resource_url: Option<url::Url>,
    /// The bound address: the host when a request names none.
    local: std::net::SocketAddr,
}

impl Metadata {
    /// The metadata of the endpoint at `endpoint` on `local`, as `mcp`
    /// configures it.
    pub fn new(
        endpoint: &'static str,
        mcp: &agentfile_config::McpSection,
        local: std::net::SocketAddr,
    ) -> Metadata {
        Metadata {
            endpoint,
            authorization_servers: mcp.authorization_servers.clone(),
            resource_url: mcp
                .resource_url
                .as_deref()
                .and_then(|u| url::Url::parse(u).ok()),
            local,
        }
    }

    /// Whether `path` is where the document is served.
    pub fn owns(&self, path: &str) -> bool {
        path.strip_prefix(WELL_KNOWN)
            .is_some_and(|rest| rest.is_empty() || rest == self.endpoint)
    }

    /// The scheme and authority clients reach the endpoint at: the
    /// configured URL's, else `http://` and the request's `Host` (when it is
    /// one), else the bound address.
    fn origin(&self, headers: &HeaderMap) -> String {
        if let Some(u) = &self.resource_url {
            return u.origin().ascii_serialization();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<http::uri::Authority>().ok())
            .map_or_else(|| self.local.to_string(), |a| a.to_string());
        format!("http://{host}")
    }

    /// The endpoint's URL, the document's `resource`.
    pub fn resource(&self, headers: &HeaderMap) -> String {
        match &self.resource_url {
            Some(u) => u.as_str().to_owned(),
            None => format!("{}{}", self.origin(headers), self.endpoint),
        }
    }

    /// The document's URL: the well-known path with the resource's path
    /// after it.
    pub fn document_url(&self, headers: &HeaderMap) -> String {
        let path = match &self.resource_url {
            Some(u) => u.path().trim_end_matches('/').to_owned(),
            None => self.endpoint.to_owned(),
        };
        format!("{}{WELL_KNOWN}{path}", self.origin(headers))
    }

    /// The document (RFC 9728 §2).
    pub fn document(&self, headers: &HeaderMap) -> Value {
        let mut doc = json!({
            "resource": self.resource(headers),
            "bearer_methods_supported": ["header"],
            "resource_name": "agentfile",
        });
        if !self.authorization_servers.is_empty() {
            doc["authorization_servers"] = json!(self.authorization_servers);
        }
        doc
    }

    /// The `WWW-Authenticate` of a 401 to a request with `headers`; `error`
    /// the RFC 6750 error code, if any.
    pub fn challenge(&self, headers: &HeaderMap, error: Option<&str>) -> HeaderValue {
        let mut c = String::from("Bearer realm=\"agentfile\"");
        if let Some(e) = error {
            c.push_str(&format!(", error=\"{e}\""));
        }
        c.push_str(&format!(
            ", resource_metadata=\"{}\"",
            self.document_url(headers)
        ));
        HeaderValue::from_str(&c)
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"agentfile\""))
    }

    /// The answer to a request for the document: it (GET, HEAD), or 405.
    /// Public, so any page may read it (`Access-Control-Allow-Origin: *`).
    pub fn respond(&self, method: &Method, headers: &HeaderMap) -> Response<String> {
        let (status, body, kind) = if method == Method::GET || method == Method::HEAD {
            (
                StatusCode::OK,
                self.document(headers).to_string(),
                "application/json",
            )
        } else {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                "Method Not Allowed: GET the metadata".to_owned(),
                "text/plain; charset=utf-8",
            )
        };
        let mut r = Response::new(if method == Method::HEAD {
            String::new()
        } else {
            body
        });
        *r.status_mut() = status;
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        if status == StatusCode::METHOD_NOT_ALLOWED {
            h.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(header::HOST, HeaderValue::from_str(h).unwrap());
        m
    }

    #[test]
    fn the_document_names_the_endpoint_reached_and_the_challenge_points_at_it() {
        let local = "127.0.0.1:8765".parse().unwrap();
        let mut mcp = agentfile_config::McpSection::default();
        let m = Metadata::new("/mcp", &mcp, local);
        assert!(m.owns(WELL_KNOWN) && m.owns("/.well-known/oauth-protected-resource/mcp"));
        assert!(!m.owns("/.well-known/oauth-protected-resource/other"));
        let h = host("localhost:8765");
        let doc = m.document(&h);
        assert_eq!(doc["resource"], "http://localhost:8765/mcp");
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
        assert!(doc.get("authorization_servers").is_none());
        assert_eq!(
            m.challenge(&h, Some("invalid_token")),
            "Bearer realm=\"agentfile\", error=\"invalid_token\", resource_metadata=\"http://localhost:8765/.well-known/oauth-protected-resource/mcp\""
        );
        // No usable Host: the bound address.
        assert_eq!(m.resource(&host("bad host")), "http://127.0.0.1:8765/mcp");
        mcp.authorization_servers = vec!["https://auth.example.com".into()];
        mcp.resource_url = Some("https://mcp.example.com/mcp".into());
        let m = Metadata::new("/mcp", &mcp, local);
        let doc = m.document(&h);
        assert_eq!(doc["resource"], "https://mcp.example.com/mcp");
        assert_eq!(
            doc["authorization_servers"],
            json!(["https://auth.example.com"])
        );
        assert_eq!(
            m.document_url(&h),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            m.respond(&Method::POST, &h).status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
