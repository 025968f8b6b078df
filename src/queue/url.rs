//! The queue address: `redis://[[USER]:PASSWORD@]HOST[:PORT]/NAME[?db=N]`.
//!
//! The path is the queue's name (not a database number, as in other Redis URLs); `?db=N` picks a
//! database when one is needed. The password is a secret: [`QueueUrl`]'s `Display` and `Debug`
//! show `***` in its place, and errors never echo the address as typed.

use std::fmt;

use crate::secret::Secret;

use super::QueueError;

/// The longest queue name accepted.
pub const MAX_NAME_LEN: usize = 100;

/// A parsed queue address: where Redis is, how to log in, and the queue's name.
#[derive(Clone)]
pub struct QueueUrl {
    host: String,
    port: u16,
    user: String,
    password: Option<Secret>,
    db: i64,
    name: String,
}

impl QueueUrl {
    /// Parse a queue address. Errors say what is wrong without repeating the address (it may
    /// carry a password).
    pub fn parse(text: &str) -> Result<QueueUrl, QueueError> {
        let bad = |reason: String| QueueError::Url { reason };
        let url = url::Url::parse(text.trim()).map_err(|e| {
            bad(format!(
                "not a URL ({e}); expected redis://HOST:PORT/NAME, e.g. redis://127.0.0.1:6379/evals"
            ))
        })?;
        match url.scheme() {
            "redis" => {}
            "rediss" => {
                return Err(bad(
                    "rediss:// (TLS) is not supported by this build; reach Redis over a private \
                     network or a TLS tunnel and use redis://"
                        .into(),
                ));
            }
            other => {
                return Err(bad(format!(
                    "the scheme is {other}:, expected redis://HOST:PORT/NAME"
                )));
            }
        }
        let host = match url.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => return Err(bad("the URL names no host: redis://HOST:PORT/NAME".into())),
        };
        let name = url.path().trim_start_matches('/').to_string();
        if name.is_empty() {
            return Err(bad(
                "the URL names no queue: add it as the path, redis://HOST:PORT/NAME".into(),
            ));
        }
        if name.len() > MAX_NAME_LEN
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(bad(format!(
                "the queue name must be 1 to {MAX_NAME_LEN} letters, digits, '.', '_' or '-'"
            )));
        }
        let mut db = 0;
        for (k, v) in url.query_pairs() {
            match &*k {
                "db" => {
                    db =
                        v.parse::<i64>().ok().filter(|d| *d >= 0).ok_or_else(|| {
                            bad(format!("db must be a database number, not {v:?}"))
                        })?;
                }
                other => {
                    return Err(bad(format!(
                        "unknown URL parameter {other:?} (only db=N is known)"
                    )));
                }
            }
        }
        // `%XX` escapes in the user and password parts.
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|text| text.into_owned())
                .map_err(|_| bad("the user or password is not valid UTF-8".into()))
        };
        let password = match url.password() {
            Some(p) => Some(Secret::new(decode(p)?)),
            None => None,
        };
        Ok(QueueUrl {
            host,
            port: url.port().unwrap_or(6379),
            user: decode(url.username())?,
            password,
            db,
            name,
        })
    }

    /// Use this password when the URL carries none (from `TAGLOOP_REDIS_PASSWORD`, so it need
    /// not appear on a command line).
    pub fn or_password(mut self, password: Option<Secret>) -> QueueUrl {
        if self.password.is_none() {
            self.password = password.filter(|p| !p.is_empty());
        }
        self
    }

    /// The queue's name (the URL's path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The password, if there is one (for the redactor).
    pub fn password(&self) -> Option<&Secret> {
        self.password.as_ref()
    }

    /// What the Redis client connects with. Built here and handed straight to the client.
    pub(super) fn connection_info(&self) -> redis::RedisResult<redis::ConnectionInfo> {
        let mut redis = redis::RedisConnectionInfo::default().set_db(self.db);
        if !self.user.is_empty() {
            redis = redis.set_username(&self.user);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p.expose());
        }
        redis::IntoConnectionInfo::into_connection_info(redis::ConnectionAddr::Tcp(
            self.host.clone(),
            self.port,
        ))
        .map(|info| info.set_redis_settings(redis))
    }
}

impl fmt::Display for QueueUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("redis://")?;
        match (&self.password, self.user.is_empty()) {
            (Some(_), true) => f.write_str(":***@")?,
            (Some(_), false) => write!(f, "{}:***@", self.user)?,
            (None, false) => write!(f, "{}@", self.user)?,
            (None, true) => {}
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        write!(f, ":{}/{}", self.port, self.name)?;
        if self.db != 0 {
            write!(f, "?db={}", self.db)?;
        }
        Ok(())
    }
}

impl fmt::Debug for QueueUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QueueUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_the_queue_and_the_password_is_never_shown() {
        let u = QueueUrl::parse("redis://:s3cr%40t@10.0.0.5:6380/evals-1?db=2").unwrap();
        assert_eq!(u.name(), "evals-1");
        assert_eq!(u.password().unwrap().expose(), "s3cr@t");
        assert_eq!(u.to_string(), "redis://:***@10.0.0.5:6380/evals-1?db=2");
        assert!(!format!("{u:?}").contains("s3cr"));
        let info = u.connection_info().unwrap();
        assert_eq!(info.redis_settings().db(), 2);
        let plain = QueueUrl::parse("redis://localhost/q").unwrap();
        assert_eq!(plain.to_string(), "redis://localhost:6379/q");
        assert_eq!(
            QueueUrl::parse("redis://[::1]:7000/q").unwrap().to_string(),
            "redis://[::1]:7000/q"
        );
    }

    #[test]
    fn bad_addresses_are_explained_without_echoing_them() {
        for (text, needle) in [
            ("redis://:hunter2@host:1", "names no queue"),
            ("http://:hunter2@host/q", "scheme is http"),
            ("rediss://:hunter2@host/q", "TLS"),
            ("redis://:hunter2@host/a/b", "queue name"),
            ("redis://:hunter2@host/q?db=x", "database number"),
            ("redis://:hunter2@host/q?timeout=1", "unknown URL parameter"),
            ("hunter2 not a url", "not a URL"),
            ("redis://:hunter2%ff@host/q", "not valid UTF-8"),
        ] {
            let e = QueueUrl::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(!e.contains("hunter2"), "{text}: {e}");
        }
    }

    #[test]
    fn a_password_from_the_environment_fills_only_an_empty_one() {
        let u = QueueUrl::parse("redis://h/q")
            .unwrap()
            .or_password(Some(Secret::new("envpw")));
        assert_eq!(u.password().unwrap().expose(), "envpw");
        let u = QueueUrl::parse("redis://:urlpw@h/q")
            .unwrap()
            .or_password(Some(Secret::new("envpw")));
        assert_eq!(u.password().unwrap().expose(), "urlpw");
    }
}
