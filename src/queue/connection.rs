//! The [`Queue`] handle: the address, the keys, the scripts and the connections every operation
//! goes through.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError};
use tokio::sync::Mutex;

use super::error::is_transient;
use super::keys::Keys;
use super::scripts::Scripts;
use super::{QueueError, QueueUrl};

/// A connection to one queue. Every command uses one shared multiplexed connection, opened on
/// first use and opened again after it broke (no command blocks in Redis). A command that fails is not retried here: callers decide (see
/// [`QueueError::is_transient`]).
pub struct Queue {
    url: QueueUrl,
    pub(super) shown: String,
    client: redis::Client,
    pub(super) keys: Keys,
    main: Mutex<Option<MultiplexedConnection>>,
    pub(super) scripts: Scripts,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Queue({})", self.shown)
    }
}

impl Queue {
    /// A queue handle; nothing is contacted until the first command.
    pub fn new(url: QueueUrl) -> Result<Queue, QueueError> {
        let shown = url.to_string();
        let info = url.connection_info().map_err(|source| QueueError::Redis {
            queue: shown.clone(),
            what: "reading the address",
            source,
        })?;
        let client = redis::Client::open(info).map_err(|source| QueueError::Redis {
            queue: shown.clone(),
            what: "reading the address",
            source,
        })?;
        Ok(Queue {
            keys: Keys::new(url.name()),
            url,
            shown,
            client,
            main: Mutex::new(None),
            scripts: Scripts::new(),
        })
    }

    /// The queue's address as shown (password hidden).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The parsed address; it holds the password, so print [`shown`](Self::shown) instead.
    pub fn url(&self) -> &QueueUrl {
        &self.url
    }

    pub(super) fn err(&self, what: &'static str, source: RedisError) -> QueueError {
        QueueError::Redis {
            queue: self.shown.clone(),
            what,
            source,
        }
    }

    async fn connection(&self, what: &'static str) -> Result<MultiplexedConnection, QueueError> {
        let mut slot = self.main.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(10)));
        let c = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| self.err(what, e))?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Forget a connection that failed, so the next command opens a new one.
    async fn failed(&self, e: RedisError, what: &'static str) -> QueueError {
        if is_transient(&e) {
            *self.main.lock().await = None;
        }
        self.err(what, e)
    }

    pub(super) async fn query<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        cmd: &redis::Cmd,
    ) -> Result<T, QueueError> {
        let mut c = self.connection(what).await?;
        match cmd.query_async(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.failed(e, what).await),
        }
    }

    pub(super) async fn pipe<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        pipe: &redis::Pipeline,
    ) -> Result<T, QueueError> {
        let mut c = self.connection(what).await?;
        match pipe.query_async(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.failed(e, what).await),
        }
    }

    pub(super) async fn script<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        inv: redis::ScriptInvocation<'_>,
    ) -> Result<T, QueueError> {
        let mut c = self.connection(what).await?;
        match inv.invoke_async(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.failed(e, what).await),
        }
    }
}
