//! Which environment variables reach what agentfile starts: the one secrets
//! rule for every consumer.
//!
//! Two questions, one answer each:
//!
//! - **Is this variable a secret?** [`Secrets::is_secret`]: a variable the
//!   config names as holding a credential (every profile's `api_key_env`,
//!   `web.gateway_token_env`, `telemetry.headers_env`, `session.url_env`,
//!   every `tools.<id>.token_env`, `mcp.state_key_env` and
//!   `mcp.state_key_previous_env`, the
//!   providers' default key variables), or one whose name is shaped like a
//!   credential's ([`secret_shaped`]: `*_KEY`, `*TOKEN*`, `*_PAT`, `*_PASS`,
//!   `*_PWD`, `*PASSPHRASE*`, `*_DSN`, `*WEBHOOK*`, `DATABASE_URL`…).
//! - **Which variables does a program the model can steer see?**
//!   [`Secrets::passes`]: only the short allowlist [`CHILD_ENV`] (and
//!   `LC_*`), never a secret. The bash tool, the commands a config binds as
//!   tools, workflow shell steps ([`Secrets::child_env`]) and `env()` in an
//!   agent's JavaScript tools ([`Secrets::lookup`]) all follow it, so what a
//!   script can read is exactly what a shell would be given.
//!
//! MCP servers are programs the user configured, not commands the model
//! chose: they inherit the environment without its secrets
//! ([`Secrets::server_env`], the same predicate), and what else they need is
//! set in their `env` table.
//!
//! What this is not: a scanner of values. A secret in a variable with an
//! innocent name that the allowlist passes (`LANG=hunter2`) is not found; the
//! allowlist is what keeps unknown names out.

use std::collections::BTreeMap;

use agentfile_config::Config;

/// The environment variables a shell started for the model gets (when set):
/// locale, terminal, user and search path, nothing else. `LC_*` pass too.
pub const CHILD_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL", "TZ",
];

/// The variables the providers read their key from when the config names none.
pub const PROVIDER_KEY_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// Whether `name` is on the allowlist of variables a shell is given (before
/// the secrets are taken out).
pub fn child_var(name: &str) -> bool {
    CHILD_ENV.contains(&name) || name.starts_with("LC_")
}

/// Whether a variable's name is shaped like a credential's (the rule lives
/// with the config, which holds only names, so a front end can ask it too).
pub use agentfile_config::secret_names::secret_shaped;

/// Why [`Secrets::lookup`] refused a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule, short (for a `policy_denied` event's `rule`).
    pub rule: String,
    /// What was refused and what to do instead.
    pub reason: String,
}

/// The secrets of one configuration: the variables it names as holding
/// credentials, beside every name [`secret_shaped`] matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// Variable name → the config key that names it.
    configured: BTreeMap<String, String>,
}

impl Secrets {
    /// The secrets `config` names, and the providers' default key variables.
    pub fn from_config(config: &Config) -> Secrets {
        let mut s = Secrets::default();
        for k in PROVIDER_KEY_VARS {
            s.add(k, "a provider's default key variable");
        }
        s.add(
            agentfile_session::DEFAULT_URL_ENV,
            "the default of session.url_env",
        );
        if let Some(k) = &config.llm.api_key_env {
            s.add(k, "llm.api_key_env");
        }
        for (name, p) in &config.profiles {
            if let Some(k) = &p.api_key_env {
                s.add(k, &format!("profiles.{name}.api_key_env"));
            }
        }
        if let Some(k) = &config.web.gateway_token_env {
            s.add(k, "web.gateway_token_env");
        }
        for (header, k) in &config.telemetry.headers_env {
            s.add(k, &format!("telemetry.headers_env.{header}"));
        }
        if let Some(k) = &config.session.url_env {
            s.add(k, "session.url_env");
        }
        for (id, t) in &config.tools {
            if let Some(k) = &t.token_env {
                s.add(k, &format!("tools.{id}.token_env"));
            }
        }
        if let Some(k) = &config.mcp.state_key_env {
            s.add(k, "mcp.state_key_env");
        }
        for k in &config.mcp.state_key_previous_env {
            s.add(k, "mcp.state_key_previous_env");
        }
        s
    }

    /// Count `name` as a secret, named by the config key `by` (a later
    /// call for the same name replaces the description).
    pub fn add(&mut self, name: &str, by: &str) {
        let name = name.trim();
        if !name.is_empty() {
            self.configured.insert(name.to_owned(), by.to_owned());
        }
    }

    /// The config key that names `name` as a secret, if one does.
    pub fn configured(&self, name: &str) -> Option<&str> {
        self.configured.get(name).map(String::as_str)
    }

    /// Whether `name` holds a secret: configured as one, or shaped like one.
    pub fn is_secret(&self, name: &str) -> bool {
        self.configured.contains_key(name) || secret_shaped(name)
    }

    /// Whether a program the model can steer (bash, a bound command, a shell
    /// step, a JavaScript tool's `env()`) may see `name`.
    pub fn passes(&self, name: &str) -> bool {
        child_var(name) && !self.is_secret(name)
    }

    /// The environment such a program gets from `vars`: only what
    /// [`Secrets::passes`], and a `PATH` without empty or relative entries
    /// (those would run programs from the workspace), sorted.
    pub fn child_env(
        &self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v) in vars {
            if !self.passes(&k) {
                continue;
            }
            let v = if k == "PATH" {
                v.split(':')
                    .filter(|p| p.starts_with('/'))
                    .collect::<Vec<_>>()
                    .join(":")
            } else {
                v
            };
            out.push((k, v));
        }
        if !out.iter().any(|(k, _)| k == "PATH") {
            out.push(("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()));
        }
        out.sort();
        out
    }

    /// The environment an MCP server the config starts gets from `vars`:
    /// every variable that is not a secret.
    pub fn server_env(&self, vars: &[(String, String)]) -> Vec<(String, String)> {
        vars.iter()
            .filter(|(k, _)| !self.is_secret(k))
            .cloned()
            .collect()
    }

    /// `env(name)` of a JavaScript tool, answered from `child_env` (the
    /// environment the bash tool runs with): the value when `name` passes
    /// (`None` when it passes but is unset), else why not.
    pub fn lookup(
        &self,
        child_env: &[(String, String)],
        name: &str,
    ) -> Result<Option<String>, Refusal> {
        if let Some(by) = self.configured(name) {
            return Err(Refusal {
                rule: "secrets: a configured key variable".to_owned(),
                reason: format!("`{name}` holds a credential ({by}); agent tools never read it"),
            });
        }
        if secret_shaped(name) {
            return Err(Refusal {
                rule: "secrets: a secret-named variable".to_owned(),
                reason: format!(
                    "`{name}` is named like a secret (key, token, password, PAT, connection URL…); agent tools never read it"
                ),
            });
        }
        if !child_var(name) {
            return Err(Refusal {
                rule: "secrets: only the variables commands are given".to_owned(),
                reason: format!(
                    "`{name}` is not passed to commands, so agent tools cannot read it either; they see {} and LC_*; pass other values as tool arguments",
                    CHILD_ENV.join(", ")
                ),
            });
        }
        Ok(child_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_with_key(var: &str) -> Config {
        let mut c = Config::default();
        c.llm.api_key_env = Some(var.to_owned());
        c
    }

    #[test]
    fn configured_key_variables_are_secrets_whatever_their_name() {
        let s = Secrets::from_config(&config_with_key("LLM_CREDENTIAL_VAR_X"));
        assert!(s.is_secret("LLM_CREDENTIAL_VAR_X"));
        let s = Secrets::from_config(&config_with_key("LANG"));
        assert!(s.is_secret("LANG"));
        assert!(!s.passes("LANG"));
        assert_eq!(s.configured("LANG"), Some("llm.api_key_env"));
        assert!(s.is_secret("OPENAI_API_KEY"));
        assert!(s.is_secret("AGENTFILE_DATABASE_URL"));
    }

    #[test]
    fn every_config_key_that_names_a_credential_makes_it_a_secret() {
        let mut c = config_with_key("LLM_VAR_A");
        let profile = agentfile_config::LlmConfig {
            api_key_env: Some("PROFILE_VAR_B".to_owned()),
            ..Default::default()
        };
        c.profiles.insert("spare".to_owned(), profile);
        c.web.gateway_token_env = Some("GATEWAY_VAR_C".to_owned());
        c.telemetry
            .headers_env
            .insert("Authorization".to_owned(), "HEADER_VAR_D".to_owned());
        c.session.url_env = Some("STORE_VAR_E".to_owned());
        c.mcp.state_key_env = Some("SEAL_VAR_F".to_owned());
        c.mcp.state_key_previous_env = vec!["SEAL_VAR_G".to_owned()];
        let s = Secrets::from_config(&c);
        for (name, by) in [
            ("LLM_VAR_A", "llm.api_key_env"),
            ("PROFILE_VAR_B", "profiles.spare.api_key_env"),
            ("GATEWAY_VAR_C", "web.gateway_token_env"),
            ("HEADER_VAR_D", "telemetry.headers_env.Authorization"),
            ("STORE_VAR_E", "session.url_env"),
            ("SEAL_VAR_F", "mcp.state_key_env"),
            ("SEAL_VAR_G", "mcp.state_key_previous_env"),
            ("AGENTFILE_DATABASE_URL", "the default of session.url_env"),
            ("GEMINI_API_KEY", "a provider's default key variable"),
        ] {
            assert!(s.is_secret(name), "{name}");
            assert_eq!(s.configured(name), Some(by), "{name}");
            assert!(s.lookup(&[], name).is_err(), "{name}");
            let vars = [(name.to_owned(), "v".to_owned())];
            assert!(s.server_env(&vars).is_empty(), "{name}");
        }
        // Only the config makes the first seven secrets.
        for name in [
            "LLM_VAR_A",
            "PROFILE_VAR_B",
            "GATEWAY_VAR_C",
            "HEADER_VAR_D",
            "STORE_VAR_E",
            "SEAL_VAR_F",
            "SEAL_VAR_G",
        ] {
            assert!(!secret_shaped(name), "{name}");
        }
        assert!(!s.is_secret("FOO_SETTING"));
    }

    #[test]
    fn env_lookup_and_child_env_agree() {
        let s = Secrets::from_config(&config_with_key("LLM_PAT"));
        let vars: Vec<(String, String)> = [
            ("PATH", "/usr/bin:.:bin:/bin"),
            ("LANG", "C"),
            ("LC_ALL", "C"),
            ("LC_SECRET", "x"),
            ("TERM", "dumb"),
            ("LLM_PAT", "k"),
            ("GITHUB_PAT", "k"),
            ("DATABASE_URL", "k"),
            ("FOO_SETTING", "v"),
            ("HOME", "/home/u"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let env = s.child_env(vars.clone());
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["HOME", "LANG", "LC_ALL", "PATH", "TERM"]);
        assert_eq!(env[3].1, "/usr/bin:/bin");
        for (k, _) in &vars {
            let looked = s.lookup(&env, k);
            assert_eq!(
                looked.is_ok(),
                env.iter().any(|(n, _)| n == k),
                "{k}: {looked:?}"
            );
        }
        assert_eq!(s.lookup(&env, "PATH").unwrap().unwrap(), "/usr/bin:/bin");
        assert_eq!(s.lookup(&env, "TZ").unwrap(), None);
        let e = s.lookup(&env, "LLM_PAT").unwrap_err();
        assert!(e.reason.contains("llm.api_key_env"), "{e:?}");
        let e = s.lookup(&env, "FOO_SETTING").unwrap_err();
        assert!(e.reason.contains("LANG"), "{e:?}");
    }

    #[test]
    fn servers_keep_the_environment_without_its_secrets() {
        let s = Secrets::from_config(&config_with_key("LLM_PAT"));
        let vars: Vec<(String, String)> = [
            ("PATH", "/bin"),
            ("PYTHONPATH", "/lib"),
            ("LLM_PAT", "k"),
            ("DATABASE_URL", "k"),
            ("GITHUB_PAT", "k"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let env = s.server_env(&vars);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", "PYTHONPATH"]);
    }
}
