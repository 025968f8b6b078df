//! A small HTTP/1.1 client for streamed turns to plain-`http://` servers: the hot path of a
//! local model server.
//!
//! # Why not reqwest here
//!
//! reqwest (through hyper) drives each connection in a task of its own and hands the body over
//! one HTTP chunk at a time through a channel, resetting its read timer for each. A streamed turn
//! is dozens of chunks (one per SSE event on most servers), and each hand-off cost about a
//! microsecond: the largest single item in a `tagloop batch` step (see BENCHMARKS.md, "CPU per
//! step"). Here the turn's own task reads the socket: one `read` brings every chunk that has
//! arrived, and they are decoded in one pass, straight into the SSE decoder.
//!
//! # Scope
//!
//! `POST` with a JSON body over plain TCP; keep-alive connections pooled per client; answers
//! framed by `Content-Length`, `Transfer-Encoding: chunked` or the end of the connection; `1xx`
//! interim answers skipped. Everything else stays with reqwest: TLS, proxies (this path is not
//! used when a proxy variable is set), HTTP/2, compression (none is asked for), and the
//! non-streamed requests.
//!
//! # Promises kept
//!
//! * Timeouts as configured: `connect_timeout` for connecting, `read_timeout` for silence
//!   between reads (it also bounds writing the request). No whole-request limit.
//! * Dropping a [`Response`] before its end closes the connection, so the server sees the client
//!   hang up and stops generating (a stop seen, the degeneration guard). Only a connection whose
//!   answer was read to its end goes back to the pool.
//! * A pooled connection the server closed meanwhile (keep-alive timeouts are often 5 s) is
//!   noticed before use when its close has arrived; when the close races the request (nothing at
//!   all comes back), the request is sent once more on a new connection.
//! * Errors have the kinds reqwest's are mapped to: nothing answered → [`Fault::Connect`]
//!   (retried by the caller), silence → [`Fault::Timeout`], a cut inside the body →
//!   [`Fault::Cut`], an answer that is not HTTP/1.x → [`Fault::NotHttp`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Idle connections kept per client (a batch at concurrency N returns up to N).
const MAX_IDLE: usize = 1024;
/// An idle connection older than this is closed rather than reused.
const IDLE_LIMIT: Duration = Duration::from_secs(30);
/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4 * 1024;
/// Bytes asked of the socket per read.
const READ_SIZE: usize = 16 * 1024;

/// What went wrong, in the kinds the caller maps to its errors.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fault {
    /// No answer at all: connecting failed, or the connection closed or broke before the
    /// status line.
    Connect(String),
    /// Nothing arrived for the read timeout.
    Timeout,
    /// The body ended or broke before its end.
    Cut(String),
    /// The answer is not HTTP/1.x (wrong port?): the reason and the start of what came.
    NotHttp(String, Vec<u8>),
}

/// The client: where to connect, the fixed part of every request, and the idle connections.
pub(super) struct PlainHttp {
    /// `host:port` as `ToSocketAddrs` reads it (names are resolved at each new connection).
    authority: String,
    /// The base URL's path (`/v1`), prefixed to every request path.
    base_path: String,
    /// The header lines after the request line, without `Content-Length` (the key among them:
    /// never printed).
    head: Vec<u8>,
    connect_timeout: Duration,
    read_timeout: Duration,
    idle: Mutex<Vec<Idle>>,
}

/// A pooled connection with its read buffer (kept, so a request allocates none).
struct Idle {
    conn: TcpStream,
    buf: Vec<u8>,
    since: Instant,
}

impl std::fmt::Debug for PlainHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainHttp")
            .field("authority", &self.authority)
            .field("base_path", &self.base_path)
            .finish_non_exhaustive()
    }
}

/// Whether reqwest would send a request to this URL through a proxy taken from the
/// environment (then this client is not used: reqwest handles proxies).
fn proxy_configured() -> bool {
    ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
}

impl PlainHttp {
    /// A client for `base_url` with these request headers, or `None` when the URL is not plain
    /// `http://` (or carries user info or a query) or a proxy is configured: reqwest serves
    /// those.
    pub(super) fn for_url(
        base_url: &str,
        headers: &reqwest::header::HeaderMap,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Option<PlainHttp> {
        if proxy_configured() {
            return None;
        }
        Self::build(base_url, headers, connect_timeout, read_timeout)
    }

    /// [`PlainHttp::for_url`] without looking at the proxy variables.
    fn build(
        base_url: &str,
        headers: &reqwest::header::HeaderMap,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Option<PlainHttp> {
        let url = reqwest::Url::parse(base_url).ok()?;
        if url.scheme() != "http"
            || !url.username().is_empty()
            || url.password().is_some()
            || url.query().is_some()
        {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(b"Host: ");
        head.extend_from_slice(host.as_bytes());
        if url.port().is_some() {
            head.extend_from_slice(format!(":{port}").as_bytes());
        }
        head.extend_from_slice(b"\r\nAccept: */*\r\n");
        for (name, value) in headers {
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        Some(PlainHttp {
            authority: format!("{host}:{port}"),
            base_path: url.path().trim_end_matches('/').to_owned(),
            head,
            connect_timeout,
            read_timeout,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Send `POST {base path}{path}` with this JSON body and read the answer's head.
    pub(super) async fn post(&self, path: &str, body: &[u8]) -> Result<Response<'_>, Fault> {
        let mut head = Vec::with_capacity(self.head.len() + 96);
        head.extend_from_slice(b"POST ");
        head.extend_from_slice(self.base_path.as_bytes());
        head.extend_from_slice(path.as_bytes());
        head.extend_from_slice(b" HTTP/1.1\r\n");
        head.extend_from_slice(&self.head);
        head.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        let request = [head.as_slice(), body];
        if let Some(idle) = self.checkout() {
            match self.exchange(idle.conn, idle.buf, &request).await {
                // The server closed the idle connection as the request went out: nothing was
                // answered, so nothing was processed twice. Once more on a new connection.
                Err(Fault::Connect(reason)) => {
                    tracing::debug!(%reason, "a pooled connection was closed; reconnecting");
                }
                other => return other,
            }
        }
        let conn = self.connect().await?;
        self.exchange(conn, Vec::with_capacity(READ_SIZE), &request)
            .await
    }

    /// An idle connection that still looks open, newest first; stale ones are closed.
    fn checkout(&self) -> Option<Idle> {
        let mut pool = self.idle.lock().ok()?;
        while let Some(idle) = pool.pop() {
            if idle.since.elapsed() > IDLE_LIMIT {
                continue;
            }
            // Readable while idle means closed (0), or bytes nobody asked for: either way unusable.
            let mut probe = [0u8; 1];
            match idle.conn.try_read(&mut probe) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Some(idle),
                _ => continue,
            }
        }
        None
    }

    fn checkin(&self, conn: TcpStream, mut buf: Vec<u8>) {
        if let Ok(mut pool) = self.idle.lock() {
            pool.retain(|idle| idle.since.elapsed() <= IDLE_LIMIT);
            if pool.len() < MAX_IDLE {
                buf.clear();
                pool.push(Idle {
                    conn,
                    buf,
                    since: Instant::now(),
                });
            }
        }
    }

    async fn connect(&self) -> Result<TcpStream, Fault> {
        let conn = match tokio::time::timeout(
            self.connect_timeout,
            TcpStream::connect(self.authority.as_str()),
        )
        .await
        {
            Err(_) => return Err(Fault::Connect("connection timed out".into())),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(Fault::Connect("connection refused".into()));
            }
            Ok(Err(e)) => return Err(Fault::Connect(e.to_string())),
            Ok(Ok(conn)) => conn,
        };
        // Requests are written whole; waiting to coalesce them only adds latency.
        let _ = conn.set_nodelay(true);
        Ok(conn)
    }

    /// Write the request (its parts in one system call where the socket takes them) on `conn`
    /// and read the answer's head into `raw` (empty).
    async fn exchange(
        &self,
        mut conn: TcpStream,
        mut raw: Vec<u8>,
        request: &[&[u8]],
    ) -> Result<Response<'_>, Fault> {
        match tokio::time::timeout(self.read_timeout, write_all_parts(&mut conn, request)).await {
            Err(_) => return Err(Fault::Timeout),
            Ok(Err(e)) => return Err(Fault::Connect(e.to_string())),
            Ok(Ok(())) => {}
        }
        loop {
            if !raw.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; 100];
                let mut parsed = httparse::Response::new(&mut headers);
                match parsed.parse(&raw) {
                    Ok(httparse::Status::Partial) if raw.len() > MAX_HEAD => {
                        return Err(not_http("the answer's head is over 64 KiB", &raw));
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => {
                        return Err(not_http(&format!("not an HTTP/1.x answer ({e})"), &raw));
                    }
                    Ok(httparse::Status::Complete(len)) => {
                        let status = parsed.code.unwrap_or(0);
                        if (100..200).contains(&status) && status != 101 {
                            // An interim answer (100 Continue, 103 Early Hints): the real one
                            // follows, perhaps already in the buffer.
                            raw.drain(..len);
                            continue;
                        }
                        let head = Head::read(&parsed).map_err(|e| not_http(&e, &raw))?;
                        return Ok(Response {
                            client: self,
                            status,
                            retry_after: head.retry_after,
                            location: head.location,
                            conn: Some(conn),
                            raw,
                            pos: len,
                            // 204 and 304 answers have no body, whatever their head says.
                            framing: if status == 204 || status == 304 {
                                Framing::Done
                            } else {
                                head.framing
                            },
                            keep_alive: head.keep_alive,
                        });
                    }
                }
            }
            let n = read_some(&mut conn, &mut raw, self.read_timeout)
                .await
                .map_err(|f| match f {
                    Fault::Cut(reason) => Fault::Connect(reason),
                    other => other,
                })?;
            if n == 0 {
                let reason = if raw.is_empty() {
                    "the server closed the connection without answering"
                } else {
                    "the server closed the connection in the middle of the answer's head"
                };
                return Err(Fault::Connect(reason.to_owned()));
            }
        }
    }
}

/// Write every byte of `parts`, as few system calls as the socket allows.
async fn write_all_parts(conn: &mut TcpStream, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> =
        parts.iter().map(|p| std::io::IoSlice::new(p)).collect();
    let mut rest = slices.as_mut_slice();
    while !rest.is_empty() {
        let n = conn.write_vectored(rest).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

fn not_http(reason: &str, raw: &[u8]) -> Fault {
    Fault::NotHttp(reason.to_owned(), raw[..raw.len().min(200)].to_vec())
}

/// Read once into the spare room of `buf`, within the read timeout. `Ok(0)`: end of stream.
async fn read_some(
    conn: &mut TcpStream,
    buf: &mut Vec<u8>,
    limit: Duration,
) -> Result<usize, Fault> {
    buf.reserve(READ_SIZE);
    match tokio::time::timeout(limit, conn.read_buf(buf)).await {
        Err(_) => Err(Fault::Timeout),
        Ok(Err(e)) => Err(Fault::Cut(e.to_string())),
        Ok(Ok(n)) => Ok(n),
    }
}

/// What the head says about the body.
struct Head {
    framing: Framing,
    keep_alive: bool,
    retry_after: Option<Duration>,
    location: Option<String>,
}

impl Head {
    fn read(parsed: &httparse::Response<'_, '_>) -> Result<Head, String> {
        let mut chunked = false;
        // A transfer coding other than chunked last: the body runs to the connection's end.
        let mut other_coding = false;
        let mut length: Option<u64> = None;
        let mut close = parsed.version == Some(0);
        let mut retry_after = None;
        let mut location = None;
        for h in parsed.headers.iter() {
            let value = String::from_utf8_lossy(h.value);
            let value = value.trim();
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // The last coding decides; only `chunked` frames the body.
                chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
                other_coding = !chunked;
            } else if h.name.eq_ignore_ascii_case("content-length") {
                let n = Some(value)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| format!("bad Content-Length '{value}'"))?;
                if length.is_some_and(|m| m != n) {
                    return Err("two different Content-Length headers".into());
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        close = false;
                    }
                }
            } else if h.name.eq_ignore_ascii_case("location") {
                location = Some(value.to_owned());
            } else if h.name.eq_ignore_ascii_case("retry-after") {
                // Negative, infinite or too large for a `Duration`: ignored.
                retry_after = value
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok());
            }
        }
        // Transfer-Encoding wins over Content-Length (RFC 9112 §6.3).
        let framing = match (chunked, other_coding, length) {
            (true, _, _) => Framing::Chunked(Chunk::Size),
            (false, true, _) | (false, false, None) => Framing::Close,
            (false, false, Some(n)) => Framing::Length(n),
        };
        Ok(Head {
            keep_alive: !close && !matches!(framing, Framing::Close),
            framing,
            retry_after,
            location,
        })
    }
}

/// How the body's end is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `Transfer-Encoding: chunked`, at this point of a chunk.
    Chunked(Chunk),
    /// This many bytes are still to come.
    Length(u64),
    /// Until the server closes the connection.
    Close,
    /// The whole body has been read.
    Done,
}

/// Where the chunked decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes to go.
    Data(u64),
    /// After a chunk's data: its line end.
    DataEnd,
    /// After the last chunk: trailer lines up to a blank one.
    Trailer,
}

/// An answer whose head has been read.
pub(super) struct Response<'c> {
    client: &'c PlainHttp,
    /// The HTTP status.
    pub(super) status: u16,
    /// `Retry-After`, in seconds.
    pub(super) retry_after: Option<Duration>,
    /// `Location` (a redirection; this client follows none).
    pub(super) location: Option<String>,
    conn: Option<TcpStream>,
    /// Received bytes not decoded yet start at `pos`.
    raw: Vec<u8>,
    pos: usize,
    framing: Framing,
    keep_alive: bool,
}

impl Response<'_> {
    /// Decode the bytes at hand into `sink`, reading the socket when none are: `Ok(false)` once
    /// the body has ended (the connection then goes back to the pool when it can be reused).
    pub(super) async fn read<F: FnMut(&[u8])>(&mut self, sink: &mut F) -> Result<bool, Fault> {
        loop {
            let gave = self.decode(sink)?;
            if self.framing == Framing::Done {
                self.release();
                return Ok(gave);
            }
            if gave {
                return Ok(true);
            }
            // `decode` stops only where it needs more bytes.
            self.fill().await?;
        }
    }

    /// Read more bytes from the socket (dropping the decoded ones first).
    async fn fill(&mut self) -> Result<(), Fault> {
        if self.pos > 0 {
            self.raw.drain(..self.pos);
            self.pos = 0;
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(Fault::Cut("the connection is gone".into()));
        };
        let n = read_some(conn, &mut self.raw, self.client.read_timeout).await?;
        if n == 0 {
            self.conn = None;
            if self.framing == Framing::Close {
                self.framing = Framing::Done;
                return Ok(());
            }
            return Err(Fault::Cut(
                "the server closed the connection before the answer's end".into(),
            ));
        }
        Ok(())
    }

    /// Decode what is buffered; whether any body bytes went to `sink`.
    fn decode(&mut self, sink: &mut dyn FnMut(&[u8])) -> Result<bool, Fault> {
        let mut gave = false;
        loop {
            let rest = &self.raw[self.pos..];
            match self.framing {
                Framing::Done => return Ok(gave),
                Framing::Close => {
                    if !rest.is_empty() {
                        sink(rest);
                        gave = true;
                        self.pos = self.raw.len();
                    }
                    return Ok(gave);
                }
                Framing::Length(left) => {
                    let take = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    if take > 0 {
                        sink(&rest[..take]);
                        gave = true;
                        self.pos += take;
                    }
                    let left = left - take as u64;
                    self.framing = if left == 0 {
                        Framing::Done
                    } else {
                        Framing::Length(left)
                    };
                    return Ok(gave);
                }
                Framing::Chunked(Chunk::Data(left)) => {
                    let take = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    if take == 0 {
                        return Ok(gave);
                    }
                    sink(&rest[..take]);
                    gave = true;
                    self.pos += take;
                    let left = left - take as u64;
                    self.framing = Framing::Chunked(if left == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left)
                    });
                }
                Framing::Chunked(state) => {
                    let Some((len, used)) = line(rest)? else {
                        return Ok(gave);
                    };
                    let text = &rest[..len];
                    self.framing = match (state, text.is_empty()) {
                        (Chunk::Size, _) => match chunk_size(text)? {
                            0 => Framing::Chunked(Chunk::Trailer),
                            size => Framing::Chunked(Chunk::Data(size)),
                        },
                        (Chunk::DataEnd, true) => Framing::Chunked(Chunk::Size),
                        (Chunk::DataEnd, false) => {
                            return Err(Fault::Cut("a chunk is longer than its size says".into()));
                        }
                        (Chunk::Trailer, true) => Framing::Done,
                        // A trailer field: not needed. (`Data` is handled by the arm above.)
                        (Chunk::Trailer, false) | (Chunk::Data(_), _) => self.framing,
                    };
                    self.pos += used;
                }
            }
        }
    }

    /// The body has ended: the connection goes back to the pool if it can be reused (nothing
    /// unread after the answer, no `Connection: close`).
    fn release(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.keep_alive
            && self.pos == self.raw.len()
        {
            self.client.checkin(conn, std::mem::take(&mut self.raw));
            self.pos = 0;
        }
    }

    /// The caller needs no more of the body (`[DONE]` was read): if its end is already here,
    /// the connection is reused; otherwise it is closed with the response.
    pub(super) fn finish(mut self) {
        if self.framing != Framing::Done {
            // Whatever follows `[DONE]` is not wanted; only its framing matters.
            let _ = self.decode(&mut |_| {});
            if self.framing != Framing::Done
                && let Some(conn) = self.conn.as_mut()
            {
                // The end may have arrived since the last read.
                if self.pos > 0 {
                    self.raw.drain(..self.pos);
                    self.pos = 0;
                }
                self.raw.reserve(READ_SIZE);
                if let Ok(n) = conn.try_read_buf(&mut self.raw)
                    && n > 0
                {
                    let _ = self.decode(&mut |_| {});
                }
            }
        }
        if self.framing == Framing::Done {
            self.release();
        }
    }

    /// The whole body (up to `limit` bytes), for an error answer; a broken body gives what came.
    pub(super) async fn text(mut self, limit: usize) -> String {
        let mut body = Vec::new();
        while body.len() < limit {
            match self.read(&mut |b| body.extend_from_slice(b)).await {
                Ok(true) => {}
                Ok(false) | Err(_) => break,
            }
        }
        body.truncate(limit);
        String::from_utf8_lossy(&body).into_owned()
    }
}

/// The next line in `rest`: its length without the line end, and the bytes it takes with it.
/// `None`: not complete yet. LF alone is accepted as a line end, as most clients do.
fn line(rest: &[u8]) -> Result<Option<(usize, usize)>, Fault> {
    match memchr::memchr(b'\n', rest) {
        Some(i) => {
            let len = if i > 0 && rest[i - 1] == b'\r' {
                i - 1
            } else {
                i
            };
            Ok(Some((len, i + 1)))
        }
        None if rest.len() > MAX_LINE => Err(Fault::Cut("a chunk line is over 4 KiB".into())),
        None => Ok(None),
    }
}

/// A chunk-size line: hex digits, then optional extensions after `;`.
fn chunk_size(line: &[u8]) -> Result<u64, Fault> {
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let digits = std::str::from_utf8(digits).unwrap_or("").trim();
    if digits.is_empty() || digits.len() > 15 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Fault::Cut(format!(
            "bad chunk size '{}'",
            String::from_utf8_lossy(&line[..line.len().min(40)])
        )));
    }
    u64::from_str_radix(digits, 16).map_err(|_| Fault::Cut(format!("bad chunk size '{digits}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::net::TcpListener;

    /// One scripted answer of the test server.
    struct Reply {
        bytes: Vec<u8>,
        /// Close the connection after writing (whatever the head says).
        close: bool,
        /// Keep the connection open and silent after writing this much.
        hang: bool,
    }

    fn reply(bytes: &str) -> Reply {
        Reply {
            bytes: bytes.as_bytes().to_vec(),
            close: false,
            hang: false,
        }
    }

    /// A loopback server answering each request with the next reply; counts connections and
    /// keeps the requests it read.
    struct Server {
        base: String,
        accepted: Arc<AtomicUsize>,
        requests: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    async fn server(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(replies.into_iter()));
        let (a, r) = (accepted.clone(), requests.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                a.fetch_add(1, Ordering::SeqCst);
                let (replies, requests) = (replies.clone(), r.clone());
                tokio::spawn(async move {
                    loop {
                        let Some(request) = read_request(&mut conn).await else {
                            return;
                        };
                        requests.lock().unwrap().push(request);
                        let Some(reply) = replies.lock().unwrap().next() else {
                            return;
                        };
                        if conn.write_all(&reply.bytes).await.is_err() {
                            return;
                        }
                        if reply.hang {
                            tokio::time::sleep(Duration::from_secs(30)).await;
                        }
                        if reply.close {
                            return;
                        }
                    }
                });
            }
        });
        Server {
            base,
            accepted,
            requests,
        }
    }

    /// Read one request (head and `Content-Length` body); `None` at the end of the connection.
    async fn read_request(conn: &mut TcpStream) -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(len)) = req.parse(&buf) {
                let body: usize = req
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                    .unwrap_or(0);
                if buf.len() >= len + body {
                    return Some(buf);
                }
            }
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn client(base: &str, read_timeout: Duration) -> PlainHttp {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("authorization", "Bearer k".parse().unwrap());
        PlainHttp::build(base, &headers, Duration::from_secs(2), read_timeout).unwrap()
    }

    /// POST once and read the whole body.
    async fn fetch(c: &PlainHttp) -> Result<(u16, String), Fault> {
        let mut r = c.post("/chat/completions", b"{\"a\":1}").await?;
        let mut body = Vec::new();
        while r.read(&mut |b| body.extend_from_slice(b)).await? {}
        Ok((r.status, String::from_utf8(body).unwrap()))
    }

    const CHUNKED: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\n \n6\r\nworld!\r\n0\r\nX-Trailer: t\r\n\r\n";

    #[tokio::test]
    async fn a_request_is_written_as_http_1_1() {
        let s = server(vec![reply(CHUNKED)]).await;
        let c = client(&s.base, Duration::from_secs(2));
        assert_eq!(fetch(&c).await.unwrap(), (200, "hello world!".into()));
        let request = String::from_utf8(s.requests.lock().unwrap()[0].clone()).unwrap();
        let port = s.base.rsplit(':').next().unwrap().trim_end_matches("/v1");
        assert!(
            request.starts_with(&format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            )),
            "{request}"
        );
        assert!(
            request.contains("\r\nauthorization: Bearer k\r\n"),
            "{request}"
        );
        assert!(
            request.ends_with("\r\nContent-Length: 7\r\n\r\n{\"a\":1}"),
            "{request}"
        );
    }

    #[tokio::test]
    async fn connections_are_reused_only_after_a_whole_answer() {
        let s = server(vec![
            reply(CHUNKED),
            reply("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"),
            reply("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nxyz"),
            reply(CHUNKED),
        ])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        assert_eq!(fetch(&c).await.unwrap().1, "hello world!");
        assert_eq!(fetch(&c).await.unwrap().1, "abc");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1, "kept alive");
        assert_eq!(fetch(&c).await.unwrap().1, "xyz");
        assert_eq!(fetch(&c).await.unwrap().1, "hello world!");
        assert_eq!(
            s.accepted.load(Ordering::SeqCst),
            2,
            "`Connection: close` is not reused"
        );
    }

    #[tokio::test]
    async fn a_response_dropped_early_closes_its_connection() {
        let s = server(vec![
            Reply {
                bytes: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
                    .to_vec(),
                close: false,
                hang: true,
            },
            reply(CHUNKED),
        ])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        let mut r = c.post("/x", b"{}").await.unwrap();
        let mut got = Vec::new();
        assert!(r.read(&mut |b| got.extend_from_slice(b)).await.unwrap());
        assert_eq!(got, b"hello");
        drop(r);
        assert_eq!(fetch(&c).await.unwrap().1, "hello world!");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2, "not reused mid-body");
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced() {
        let s = server(vec![
            Reply {
                close: true,
                ..reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            },
            reply(CHUNKED),
        ])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        assert_eq!(fetch(&c).await.unwrap().1, "ok");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(fetch(&c).await.unwrap().1, "hello world!");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_close_racing_the_request_is_sent_again_on_a_new_connection() {
        // The pooled connection is handed out (nothing says it closed yet), then the server
        // closes it without answering: the request goes once more on a fresh connection.
        let s = server(vec![
            reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
            Reply {
                bytes: Vec::new(),
                close: true,
                hang: false,
            },
            reply(CHUNKED),
        ])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        assert_eq!(fetch(&c).await.unwrap().1, "ok");
        assert_eq!(fetch(&c).await.unwrap().1, "hello world!");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
        assert_eq!(s.requests.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn no_answer_on_a_new_connection_is_a_connect_fault() {
        let s = server(vec![Reply {
            bytes: Vec::new(),
            close: true,
            hang: false,
        }])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        let e = fetch(&c).await.unwrap_err();
        assert!(
            matches!(&e, Fault::Connect(r) if r.contains("without answering")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn refused_and_not_http_are_told_apart() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        drop(listener);
        let e = fetch(&client(&base, Duration::from_secs(2)))
            .await
            .unwrap_err();
        assert_eq!(e, Fault::Connect("connection refused".into()));

        let s = server(vec![reply("SSH-2.0-OpenSSH_9.6\r\n\r\n")]).await;
        let e = fetch(&client(&s.base, Duration::from_secs(2)))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Fault::NotHttp(r, start) if r.contains("not an HTTP") && start.starts_with(b"SSH-2.0")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn interim_answers_are_skipped_and_errors_keep_status_and_retry_after() {
        let s = server(vec![
            reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
            reply("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 13\r\n\r\n{\"error\":\"x\"}"),
            reply("HTTP/1.1 308 Permanent Redirect\r\nLocation: https://h/v1/chat/completions\r\nContent-Length: 0\r\n\r\n"),
            reply("HTTP/1.1 204 No Content\r\n\r\n"),
            reply("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1e20\r\nContent-Length: 0\r\n\r\n"),
        ])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        assert_eq!(fetch(&c).await.unwrap(), (200, "ok".into()));
        let r = c.post("/x", b"{}").await.unwrap();
        assert_eq!(
            (r.status, r.retry_after),
            (429, Some(Duration::from_secs(2)))
        );
        assert_eq!(r.text(1 << 20).await, "{\"error\":\"x\"}");
        let r = c.post("/x", b"{}").await.unwrap();
        assert_eq!(
            (r.status, r.location.as_deref()),
            (308, Some("https://h/v1/chat/completions"))
        );
        // No body and no framing: not read to the end of the connection.
        assert_eq!(fetch(&c).await.unwrap(), (204, String::new()));
        // A Retry-After no `Duration` can hold is ignored, not a panic.
        let r = c.post("/x", b"{}").await.unwrap();
        assert_eq!((r.status, r.retry_after), (429, None));
    }

    #[tokio::test]
    async fn silence_is_a_timeout_and_an_early_close_is_a_cut() {
        let s = server(vec![Reply {
            bytes: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            close: false,
            hang: true,
        }])
        .await;
        let c = client(&s.base, Duration::from_millis(200));
        assert_eq!(fetch(&c).await.unwrap_err(), Fault::Timeout);

        let s = server(vec![Reply {
            bytes: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec(),
            close: true,
            hang: false,
        }])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        assert!(matches!(fetch(&c).await.unwrap_err(), Fault::Cut(_)));

        // Without framing, the end of the connection is the end of the body.
        let s = server(vec![Reply {
            bytes: b"HTTP/1.1 200 OK\r\n\r\nall of it".to_vec(),
            close: true,
            hang: false,
        }])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        assert_eq!(fetch(&c).await.unwrap().1, "all of it");
    }

    #[tokio::test]
    async fn transfer_encoding_wins_over_content_length_and_lengths_are_digits() {
        let s = server(vec![
            Reply {
                close: true,
                ..reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nokextra")
            },
            reply("HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"),
        ])
        .await;
        let c = client(&s.base, Duration::from_secs(2));
        assert_eq!(fetch(&c).await.unwrap().1, "okextra", "read to the close");
        let e = fetch(&c).await.unwrap_err();
        assert!(
            matches!(&e, Fault::NotHttp(r, _) if r.contains("Content-Length")),
            "{e:?}"
        );
    }

    /// Decode `bytes` handed over in pieces of `piece` bytes; the body and the final state.
    fn decode_in_pieces(
        framing: Framing,
        bytes: &[u8],
        piece: usize,
    ) -> Result<(Vec<u8>, Framing), Fault> {
        let c = client("http://127.0.0.1:9/v1", Duration::from_secs(1));
        let mut r = Response {
            client: &c,
            status: 200,
            retry_after: None,
            location: None,
            conn: None,
            raw: Vec::new(),
            pos: 0,
            framing,
            keep_alive: true,
        };
        let mut body = Vec::new();
        for part in bytes.chunks(piece) {
            r.raw.extend_from_slice(part);
            r.decode(&mut |b| body.extend_from_slice(b))?;
        }
        Ok((body, r.framing))
    }

    #[test]
    fn chunked_bodies_decode_whatever_the_pieces() {
        let body = &CHUNKED.as_bytes()[CHUNKED.find("\r\n\r\n").unwrap() + 4..];
        for piece in 1..=body.len() {
            let (got, end) = decode_in_pieces(Framing::Chunked(Chunk::Size), body, piece).unwrap();
            assert_eq!(got, b"hello world!", "pieces of {piece}");
            assert_eq!(end, Framing::Done, "pieces of {piece}");
        }
    }

    #[test]
    fn broken_chunks_are_cuts() {
        for bad in [
            &b"zz\r\nhello\r\n"[..],
            b"5\r\nhello!!\r\n",
            b";\r\n",
            b"+5\r\nhello\r\n",
            &[b'1'; 5000],
        ] {
            let e = decode_in_pieces(Framing::Chunked(Chunk::Size), bad, 3).unwrap_err();
            assert!(matches!(e, Fault::Cut(_)), "{bad:?}: {e:?}");
        }
    }

    #[test]
    fn urls_that_need_reqwest_get_none() {
        let h = reqwest::header::HeaderMap::new();
        let t = Duration::from_secs(1);
        for url in [
            "https://api.openai.com/v1",
            "http://user:pw@127.0.0.1:8080/v1",
            "http://127.0.0.1:8080/v1?key=x",
        ] {
            assert!(PlainHttp::build(url, &h, t, t).is_none(), "{url}");
        }
        let c = PlainHttp::build("http://[::1]:8080/v1/", &h, t, t).unwrap();
        assert_eq!(
            (c.authority.as_str(), c.base_path.as_str()),
            ("[::1]:8080", "/v1")
        );
        let c = PlainHttp::build("http://localhost/", &h, t, t).unwrap();
        assert_eq!(
            (c.authority.as_str(), c.base_path.as_str()),
            ("localhost:80", "")
        );
        assert!(String::from_utf8_lossy(&c.head).starts_with("Host: localhost\r\n"));
    }
}
