//! Estimated cost of a call: tokens × a per-model price.
//!
//! The built-in table is a snapshot of public list prices (USD per million tokens,
//! standard tier, no caching or batch discounts) for well-known models; it goes
//! stale, so `pricing` in the config overrides or extends it. A model found in
//! neither has cost `None` — never zero by guesswork, never a panic — so budgets
//! can tell "free" from "unknown".
//!
//! Matching is by exact name, then by the longest table entry the name starts with
//! at a `-`, `:` or `@` boundary, so dated snapshots (`claude-sonnet-4-5-20250929`,
//! `gpt-4o-2024-08-06`) find their family. Router-style names
//! (`anthropic/claude-sonnet-4.5`) are tried without the vendor prefix, and Claude
//! names with dots as dashes.

use std::collections::BTreeMap;

use crate::types::Usage;
use agentfile_config::Price;

/// (model family, input USD/Mtok, output USD/Mtok).
const BUILTIN: &[(&str, f64, f64)] = &[
    // Anthropic
    ("claude-opus-4-6", 5.0, 25.0),
    ("claude-opus-4-5", 5.0, 25.0),
    ("claude-opus-4-1", 15.0, 75.0),
    ("claude-opus-4", 15.0, 75.0),
    ("claude-sonnet-4-6", 3.0, 15.0),
    ("claude-sonnet-4-5", 3.0, 15.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-haiku-4-5", 1.0, 5.0),
    ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-3-5-sonnet", 3.0, 15.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("claude-3-opus", 15.0, 75.0),
    ("claude-3-haiku", 0.25, 1.25),
    // OpenAI
    ("gpt-5.2", 1.75, 14.0),
    ("gpt-5.1", 1.25, 10.0),
    ("gpt-5", 1.25, 10.0),
    ("gpt-5-mini", 0.25, 2.0),
    ("gpt-5-nano", 0.05, 0.4),
    ("gpt-4.1", 2.0, 8.0),
    ("gpt-4.1-mini", 0.4, 1.6),
    ("gpt-4.1-nano", 0.1, 0.4),
    ("gpt-4o", 2.5, 10.0),
    ("gpt-4o-mini", 0.15, 0.6),
    ("gpt-4-turbo", 10.0, 30.0),
    ("gpt-3.5-turbo", 0.5, 1.5),
    ("o1", 15.0, 60.0),
    ("o1-mini", 1.1, 4.4),
    ("o3", 2.0, 8.0),
    ("o3-pro", 20.0, 80.0),
    ("o3-mini", 1.1, 4.4),
    ("o4-mini", 1.1, 4.4),
    // Google
    ("gemini-3-pro", 2.0, 12.0),
    ("gemini-3-flash", 0.5, 3.0),
    ("gemini-2.5-pro", 1.25, 10.0),
    ("gemini-2.5-flash", 0.3, 2.5),
    ("gemini-2.5-flash-lite", 0.1, 0.4),
    ("gemini-2.0-flash", 0.1, 0.4),
    ("gemini-2.0-flash-lite", 0.075, 0.3),
];

/// Prices for one provider: the config's overrides first, then the built-in table.
#[derive(Debug, Clone, Default)]
pub struct Pricing {
    overrides: BTreeMap<String, Price>,
    /// Every model costs nothing (a local server such as Ollama).
    free: bool,
}

impl Pricing {
    /// The built-in table with `overrides` (from `Config.pricing`) on top.
    pub fn new(overrides: BTreeMap<String, Price>) -> Self {
        Pricing {
            overrides,
            free: false,
        }
    }

    /// A price table for a local server: unlisted models cost 0, not "unknown".
    pub fn free(overrides: BTreeMap<String, Price>) -> Self {
        Pricing {
            overrides,
            free: true,
        }
    }

    /// The price of `model`, if known.
    pub fn price(&self, model: &str) -> Option<Price> {
        for name in candidates(model) {
            if let Some(p) = lookup(self.overrides.iter().map(|(k, v)| (k.as_str(), *v)), &name) {
                return Some(p);
            }
        }
        if self.free {
            return Some(Price {
                input: 0.0,
                output: 0.0,
            });
        }
        candidates(model).into_iter().find_map(|name| {
            lookup(
                BUILTIN
                    .iter()
                    .map(|&(k, input, output)| (k, Price { input, output })),
                &name,
            )
        })
    }

    /// Estimated USD cost of `usage` on `model`, `None` when the price is unknown.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        let p = self.price(model)?;
        // Token counts are far below 2^53, so the conversion is exact.
        Some(
            (usage.input_tokens as f64 * p.input + usage.output_tokens as f64 * p.output)
                / 1_000_000.0,
        )
    }
}

/// Spellings of `model` to look up, most specific first.
fn candidates(model: &str) -> Vec<String> {
    let lower = model.trim().to_ascii_lowercase();
    let mut out = vec![lower.clone()];
    if let Some((_, bare)) = lower.rsplit_once('/') {
        out.push(bare.to_owned());
    }
    let bare = out.last().cloned().unwrap_or_default();
    // Only Claude versions are dotted by routers and dashed by the vendor; a dot in
    // an OpenAI or Gemini name (`gpt-5.2`, `gemini-2.5-pro`) is part of it.
    if bare.starts_with("claude") && bare.contains('.') {
        out.push(bare.replace('.', "-"));
    }
    out
}

fn lookup<'a>(table: impl Iterator<Item = (&'a str, Price)>, name: &str) -> Option<Price> {
    let mut best: Option<(usize, Price)> = None;
    for (key, price) in table {
        let key_l = key.to_ascii_lowercase();
        if key_l == name {
            return Some(price);
        }
        let boundary = name
            .strip_prefix(key_l.as_str())
            .and_then(|rest| rest.chars().next())
            .is_some_and(|c| matches!(c, '-' | ':' | '@'));
        if boundary && best.is_none_or(|(len, _)| key_l.len() > len) {
            best = Some((key_l.len(), price));
        }
    }
    best.map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(input: f64, output: f64) -> Option<Price> {
        Some(Price { input, output })
    }

    #[test]
    fn snapshots_find_their_family() {
        let t = Pricing::default();
        assert_eq!(t.price("claude-sonnet-4-5-20250929"), p(3.0, 15.0));
        assert_eq!(t.price("claude-opus-4-1-20250805"), p(15.0, 75.0));
        assert_eq!(t.price("claude-opus-4-5"), p(5.0, 25.0));
        assert_eq!(t.price("gpt-4o-2024-08-06"), p(2.5, 10.0));
        assert_eq!(t.price("gpt-4o-mini-2024-07-18"), p(0.15, 0.6));
        assert_eq!(t.price("gemini-2.5-flash-lite"), p(0.1, 0.4));
        assert_eq!(t.price("gemini-2.5-flash-preview-09-2025"), p(0.3, 2.5));
        assert_eq!(t.price("gemini-3-pro-preview"), p(2.0, 12.0));
        assert_eq!(t.price("o3-mini"), p(1.1, 4.4));
    }

    #[test]
    fn prefixes_stop_at_boundaries() {
        let t = Pricing::default();
        // `gpt-5` must not price `gpt-5.9`, nor `o1` price `o10`.
        assert_eq!(t.price("gpt-5.9"), None);
        assert_eq!(t.price("o10"), None);
    }

    #[test]
    fn router_names_are_understood() {
        let t = Pricing::default();
        assert_eq!(t.price("anthropic/claude-sonnet-4.5"), p(3.0, 15.0));
        assert_eq!(t.price("openai/gpt-4o"), p(2.5, 10.0));
        assert_eq!(t.price("google/gemini-2.5-pro"), p(1.25, 10.0));
    }

    #[test]
    fn unknown_model_has_no_cost() {
        let t = Pricing::default();
        assert_eq!(t.price("llama3.1:8b"), None);
        assert_eq!(t.cost("", &Usage::default()), None);
    }

    #[test]
    fn config_overrides_win() {
        let mut o = BTreeMap::new();
        o.insert(
            "gpt-4o".to_owned(),
            Price {
                input: 1.0,
                output: 2.0,
            },
        );
        o.insert(
            "my-model".to_owned(),
            Price {
                input: 4.0,
                output: 8.0,
            },
        );
        let t = Pricing::new(o);
        assert_eq!(t.price("gpt-4o-2024-08-06"), p(1.0, 2.0));
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
        };
        assert_eq!(t.cost("my-model", &u), Some(8.0));
        assert_eq!(t.cost("claude-haiku-4-5", &u), Some(3.5));
    }

    #[test]
    fn local_servers_are_free() {
        let t = Pricing::free(BTreeMap::new());
        assert_eq!(
            t.cost(
                "llama3.1:8b",
                &Usage {
                    input_tokens: 9,
                    output_tokens: 9
                }
            ),
            Some(0.0)
        );
    }
}
