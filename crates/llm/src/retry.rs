//! When and how long to wait before trying a failed model call again.
//!
//! Exponential backoff with jitter, so that many agents hitting the same rate limit
//! do not retry in lockstep; a provider's `Retry-After` (delta-seconds or HTTP-date)
//! or `retry-after-ms` (sent by OpenAI-style servers) wins over our own guess. This
//! module only computes delays: the loop that sleeps, and can be cancelled while
//! sleeping, is in `http.rs`. *Which* errors are retried is
//! [`crate::LlmError::is_retryable`].

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// How persistent to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The backoff before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// The backoff never grows past this.
    pub max_delay: Duration,
    /// A `Retry-After` longer than this is not waited out: the call fails instead,
    /// since a run stuck for an hour looks hung.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        }
    }

    /// The wait before attempt `failed + 1`, after `failed` attempts have failed, or
    /// `None` when the provider asked for a longer wait than
    /// [`RetryPolicy::max_retry_after`].
    pub fn delay(&self, failed: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(wait) = retry_after {
            return (wait <= self.max_retry_after).then_some(wait);
        }
        Some(self.backoff(failed))
    }

    /// Exponential backoff with "equal jitter": half the step fixed, half random, so
    /// that the wait never collapses to zero yet retries spread out.
    pub fn backoff(&self, failed: u32) -> Duration {
        let exp = failed.saturating_sub(1).min(20);
        let step = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let half = step / 2;
        let jitter_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        let jitter = if jitter_nanos == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(random_u64() % (jitter_nanos + 1))
        };
        half + jitter
    }
}

/// A random number without a dependency: std's `RandomState` is seeded from the OS
/// once per process and perturbed per instance, which is plenty for jitter.
fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, OpenAI and Azure
/// send it) first, then `Retry-After` (seconds or an HTTP-date, RFC 9110 §10.2.3).
pub fn retry_after_from_headers(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        // `try_`: a value too large for a Duration (`1e300`) is ignored, not a panic.
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = headers.get("retry-after")?.to_str().ok()?;
    parse_retry_after(value, SystemTime::now())
}

/// Parse a `Retry-After` value relative to `now`. A date in the past means "now".
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    // Not in the RFC, but some servers send fractional seconds; accept rather than ignore.
    if let Ok(secs) = value.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_forms() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("0.25", now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn headers_prefer_milliseconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after_from_headers(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(
            retry_after_from_headers(&h),
            Some(Duration::from_millis(150))
        );
        assert_eq!(retry_after_from_headers(&HeaderMap::new()), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(5),
        };
        for _ in 0..50 {
            let d1 = p.backoff(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = p.backoff(3);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            let d9 = p.backoff(9);
            assert!(d9 >= Duration::from_millis(500) && d9 <= Duration::from_millis(1000));
        }
        assert!(p.backoff(u32::MAX) <= Duration::from_millis(1000));
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(7))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(3600))), None);
        assert!(p.delay(1, None).is_some());
    }
}
