//! Which environment variables' names are shaped like a credential's: the
//! one rule the secrets filter of the tools and the front ends' warnings
//! about secret-looking inputs share.
//!
//! What this is not: a scanner of values, nor the list of variables a config
//! names as holding credentials (the tools' `secrets` module adds those).

/// Whether a variable's name is shaped like a credential's. Case does not
/// matter; the name is split into words at every character that is not a
/// letter or digit (`DB_PASS` is `DB`, `PASS`).
pub fn secret_shaped(name: &str) -> bool {
    // A whole word that names a credential.
    const WORDS: &[&str] = &[
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASS",
        "PWD",
        "PASSPHRASE",
        "PASSCODE",
        "CREDENTIAL",
        "CREDENTIALS",
        "CRED",
        "CREDS",
        "AUTH",
        "COOKIE",
        "COOKIES",
        "PRIVATE",
        "PAT",
        "DSN",
        "CONNSTR",
        "WEBHOOK",
        "WEBHOOKS",
        "NETRC",
        "OTP",
        "TOTP",
    ];
    // The end of a word (`PGPASSWORD`, `GHTOKEN`, `OAUTH`).
    const ENDINGS: &[&str] = &[
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "AUTH",
        "DSN",
    ];
    // Anywhere in the name (`MYTOKENVALUE`).
    const INSIDE: &[&str] = &[
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "TOKEN",
        "CREDENTIAL",
    ];
    // A URL or connection string of a service that takes a password in it.
    const STORES: &[&str] = &[
        "DATABASE",
        "DB",
        "REDIS",
        "MONGO",
        "MONGODB",
        "POSTGRES",
        "POSTGRESQL",
        "PG",
        "MYSQL",
        "MARIADB",
        "SQL",
        "AMQP",
        "RABBITMQ",
        "BROKER",
        "CELERY",
        "SMTP",
        "CONNECTION",
        "CONN",
    ];
    const LOCATORS: &[&str] = &["URL", "URLS", "URI", "URIS", "STRING", "STR"];
    let n = name.to_ascii_uppercase();
    if n == "PWD" {
        // The shell's working directory.
        return false;
    }
    let words: Vec<&str> = n
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let word = |list: &[&str]| words.iter().any(|w| list.contains(w));
    words.iter().any(|w| {
        WORDS.contains(w)
            || ENDINGS
                .iter()
                .any(|end| w.len() > end.len() && w.ends_with(end))
    }) || INSIDE.iter().any(|s| n.contains(s))
        || (word(STORES) && word(LOCATORS))
        || n.starts_with("AWS_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_secret_shaped() {
        for n in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "GITHUB_PAT",
            "APIKEY",
            "db_password",
            "DB_PASS",
            "MYSQL_PWD",
            "PGPASSWORD",
            "GPG_PASSPHRASE",
            "SLACK_WEBHOOK_URL",
            "DATABASE_URL",
            "AGENTFILE_DATABASE_URL",
            "REDIS_URL",
            "MONGODB_URI",
            "SENTRY_DSN",
            "AZURE_STORAGE_CONNECTION_STRING",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "SSH_AUTH_SOCK",
            "NPM_CONFIG__AUTH",
            "OAUTH",
            "SESSION_COOKIE",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "X_PRIVATE",
            "MYTOKENVALUE",
        ] {
            assert!(secret_shaped(n), "{n}");
        }
        for n in [
            "PATH",
            "PWD",
            "OLDPWD",
            "HOME",
            "LANG",
            "INPUT_PATH",
            "AUTHOR_NAME",
            "KEYWORDS",
            "WORKFLOW_REQUEST",
            "FOO_SETTING",
            "DATABASE_NAME",
            "PUBLIC_URL",
            "PASSAGE",
        ] {
            assert!(!secret_shaped(n), "{n}");
        }
    }
}
