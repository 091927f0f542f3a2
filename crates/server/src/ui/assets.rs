//! The page's files, embedded in the binary: looked up by exact name in a
//! fixed table (nothing is read from disk), each with an ETag so a browser
//! revalidates rather than downloads again.

use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use sha2::{Digest, Sha256};

use super::Body;

macro_rules! table {
    ($($name:literal),* $(,)?) => {
        /// Every asset: its name and contents.
        pub(super) const FILES: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("assets/", $name))),)*
        ];
    };
}

table!(
    "app.html",
    "login.html",
    "app.css",
    "api.js",
    "app.js",
    "dom.js",
    "events.js",
    "format.js",
    "graph.js",
    "list.js",
    "live.js",
    "login.js",
    "session.js",
    "timeline.js",
);

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// The text of an asset (empty for an unknown name).
pub(super) fn text_of(name: &str) -> &'static str {
    FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, t)| t)
}

fn etag(name: &str) -> Option<&'static str> {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        FILES
            .iter()
            .map(|(_, t)| {
                let d = Sha256::digest(t.as_bytes());
                let hex: String = d[..8].iter().map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    });
    let i = FILES.iter().position(|(n, _)| *n == name)?;
    Some(tags[i].as_str())
}

/// `GET /ui/assets/<name>`.
pub(super) fn serve(name: &str, headers: &HeaderMap) -> Response<Body> {
    let Some(tag) = etag(name) else {
        return super::text(StatusCode::NOT_FOUND, "Not Found: no such asset");
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let mut r = if fresh {
        let mut r = Response::new(Full::new(Bytes::new()).boxed());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        page(name)
    };
    let h = r.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_static(tag));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// An asset as a whole response.
pub(super) fn page(name: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text_of(name).as_bytes())).boxed());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(name)),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_folder_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ui/assets");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut embedded: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
    }

    /// Event text is hostile: no asset may hand a string to an HTML or
    /// script parser, or carry inline script or style (the CSP forbids
    /// them, so they would only break).
    #[test]
    fn no_asset_parses_strings_as_markup_or_code() {
        let forbidden = [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "javascript:",
            "createContextualFragment",
            "DOMParser",
            "srcdoc",
            "setAttribute('style'",
            "setAttribute(\"style\"",
            " style=\"",
            " onclick=",
            " onload=",
            " onerror=",
        ];
        for (name, text) in FILES {
            for f in forbidden {
                assert!(!text.contains(f), "{name} contains {f:?}");
            }
            if name.ends_with(".html") {
                assert!(
                    !text.contains("<script>") && !text.contains("<style"),
                    "{name} has inline script or style"
                );
            }
        }
    }

    #[test]
    fn assets_revalidate_by_etag() {
        let r = serve("app.css", &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::OK);
        let tag = r.headers()[header::ETAG].clone();
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, tag);
        assert_eq!(serve("app.css", &h).status(), StatusCode::NOT_MODIFIED);
        assert_eq!(serve("../Cargo.toml", &h).status(), StatusCode::NOT_FOUND);
        assert_eq!(serve("nope.js", &h).status(), StatusCode::NOT_FOUND);
    }
}
