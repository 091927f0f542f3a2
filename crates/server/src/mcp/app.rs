//! The run view as an MCP App (the `io.modelcontextprotocol/ui` extension,
//! SEP-1865): one `ui://` resource, an HTML page a host that renders apps
//! shows beside a `run` tool's result. The `run` and `run_<name>` tools link
//! it in their `_meta.ui.resourceUri`.
//!
//! The page ([`HTML`], self-contained: hosts give it no network) talks only
//! to its host over `postMessage`: it hears the tool's result, follows the
//! session with the `event` tool and answers an approval with `approve`,
//! both called through the host. Hosts that do not render apps ignore the
//! link; the tools' results are the same either way.

use rmcp::model::{
    ListResourcesResult, MetaObject, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceContents,
};
use serde_json::{Map, Value, json};

/// The extension's id in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The resource's URI.
pub const URI: &str = "ui://agentfile/run";
/// The MIME type of an MCP App page.
pub const MIME: &str = "text/html;profile=mcp-app";
/// The page.
pub const HTML: &str = include_str!("app.html");

/// The `_meta` that links a tool to the page.
pub fn tool_meta() -> MetaObject {
    let mut meta = MetaObject::new();
    meta.0.insert("ui".into(), json!({ "resourceUri": URI }));
    meta
}

/// What the server declares for the extension.
pub fn capability() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("mimeTypes".into(), json!([MIME]));
    m
}

fn resource() -> Resource {
    let mut r = Resource::new(URI, "run-view").with_title("agentfile run");
    r.description = Some(
        "A live view of a workflow run: its status, events, outputs and usage, \
         with approve and reject when it waits for a person."
            .into(),
    );
    r.mime_type = Some(MIME.into());
    r.size = Some(HTML.len() as u64);
    r
}

/// `resources/list`: the one page.
pub fn list() -> ListResourcesResult {
    ListResourcesResult::with_all_items(vec![resource()])
}

/// `resources/read`: the page, or `None` for another URI.
pub fn read(params: &ReadResourceRequestParams) -> Option<ReadResourceResult> {
    (params.uri == URI).then(|| {
        let mut meta = MetaObject::new();
        // No network, no frames: the page needs nothing but its host.
        meta.0.insert("ui".into(), json!({ "prefersBorder": true }));
        ReadResourceResult::new(vec![
            ResourceContents::text(HTML, URI)
                .with_mime_type(MIME)
                .with_meta(meta),
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page sets run text as text only, and reaches nothing outside its
    /// host.
    #[test]
    fn the_page_is_inert_and_offline() {
        for forbidden in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "http://",
            "https://",
            "fetch(",
            "XMLHttpRequest",
            "WebSocket",
        ] {
            assert!(
                !HTML.contains(forbidden),
                "the app page contains {forbidden:?}"
            );
        }
        assert!(HTML.contains("ui/initialize") && HTML.contains("ui/notifications/tool-result"));
    }
}
