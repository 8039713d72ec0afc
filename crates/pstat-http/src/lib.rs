#![warn(missing_docs)]

//! The one HTTP client behind pstat's OpenAI-compatible endpoints (the behavioral server
//! backend and the cluster labeler): http and https (rustls, web-PKI roots), an API key read
//! from the environment, a per-request timeout, and retries with exponential backoff on what a
//! retry can cure (429, 408, 5xx, timeouts, refused or dropped connections, and responses the
//! caller's check rejects, such as truncated JSON). A server's error body is kept in the
//! message; the key never is.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, mpsc};
use std::time::{Duration, Instant};

/// The variable read for the API key when none is named.
pub const DEFAULT_KEY_VARIABLE: &str = "OPENAI_API_KEY";

/// Largest response body read (a top-n of 262,144 log-probabilities keyed by text is ~10 MB).
const BODY_LIMIT: u64 = 256 << 20;

/// Longest part of a server's error body kept in a message.
const BODY_EXCERPT: usize = 2000;

/// Longest `timeout_s` accepted (one day): any longer is a typo, and a duration beyond what
/// the clock can add panics.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// Longest `max_backoff_ms` accepted (one hour); a server's `Retry-After` is capped by
/// `max_backoff_ms` and, before that, read as at most this long.
pub const MAX_BACKOFF_MS: u64 = 3_600_000;

/// How often a request still waiting for its answer (or for its next attempt) is reported.
pub const REPORT_EVERY: Duration = Duration::from_secs(30);

/// Where the lines of requests that wait long go (stderr, and a run's log).
pub type Reporter = Arc<dyn Fn(&str) + Send + Sync>;

static REPORTER: RwLock<Option<Reporter>> = RwLock::new(None);

/// Sends the lines of long waits to `reporter` (`None`: to stderr) until replaced. A run sets
/// it so that its log gets them too.
pub fn set_reporter(reporter: Option<Reporter>) {
    *REPORTER.write().unwrap_or_else(|e| e.into_inner()) = reporter;
}

fn report(line: &str) {
    match &*REPORTER.read().unwrap_or_else(|e| e.into_inner()) {
        Some(reporter) => reporter(line),
        None => eprintln!("{line}"),
    }
}

/// Timeout, retries and credentials of a client; every field has a default, so a config
/// names only what it changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpOptions {
    /// Seconds one request may take, connection to last byte, before it counts as failed
    /// (and is retried).
    pub timeout_s: f64,
    /// Retries after the first attempt of a request.
    pub retries: usize,
    /// Wait before the first retry, in milliseconds; doubled for every further retry.
    pub backoff_ms: u64,
    /// Longest wait between two attempts (also caps a server's `Retry-After`).
    pub max_backoff_ms: u64,
    /// Environment variable holding the API key (sent as `Authorization: Bearer`). Unset:
    /// `OPENAI_API_KEY` when it is set, otherwise no key. A named variable must be set.
    pub api_key_env: Option<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            timeout_s: 300.0,
            retries: 5,
            backoff_ms: 500,
            max_backoff_ms: 30_000,
            api_key_env: None,
        }
    }
}

impl HttpOptions {
    /// Every duration checked against its bounds, naming the field: the client never panics
    /// on a duration, whatever number a config or a flag gives.
    pub fn validate(&self) -> Result<(), HttpError> {
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0 && self.timeout_s <= MAX_TIMEOUT_S)
        {
            // A huge number as written (1e300), not as its 301 digits.
            let shown = if self.timeout_s.abs() >= 1e6 {
                format!("{:e}", self.timeout_s)
            } else {
                self.timeout_s.to_string()
            };
            return Err(HttpError::Config(format!(
                "timeout_s = {shown} (expected a positive number of seconds, at most {MAX_TIMEOUT_S})"
            )));
        }
        if self.max_backoff_ms > MAX_BACKOFF_MS {
            return Err(HttpError::Config(format!(
                "max_backoff_ms = {} (at most {MAX_BACKOFF_MS}, one hour)",
                self.max_backoff_ms
            )));
        }
        if self.retries > 100 {
            return Err(HttpError::Config(format!(
                "retries = {} (at most 100)",
                self.retries
            )));
        }
        if self.backoff_ms > self.max_backoff_ms {
            return Err(HttpError::Config(format!(
                "backoff_ms = {} exceeds max_backoff_ms = {}",
                self.backoff_ms, self.max_backoff_ms
            )));
        }
        Ok(())
    }

    /// Wait before retry number `retry` (1-based): `backoff_ms · 2^(retry−1)`, at most
    /// `max_backoff_ms`, or the server's `Retry-After` when that is longer (also capped); then
    /// a random 50–100% of it so that requests failed together do not retry together.
    fn backoff(&self, retry: usize, retry_after: Option<Duration>) -> Duration {
        let cap = Duration::from_millis(self.max_backoff_ms);
        let doubled = Duration::from_millis(self.backoff_ms)
            .saturating_mul(1u32 << (retry.saturating_sub(1)).min(20))
            .min(cap);
        let wait = retry_after.map_or(doubled, |r| r.min(cap).max(doubled));
        wait.mul_f64(rand::random_range(0.5..=1.0))
    }

    /// The longest a request can take before it gives up: every attempt's timeout and the
    /// longest wait before each retry.
    pub fn longest_wait(&self) -> Duration {
        let attempts = self.retries as u32 + 1;
        Duration::from_secs_f64(self.timeout_s).saturating_mul(attempts)
            + Duration::from_millis(self.max_backoff_ms).saturating_mul(self.retries as u32)
    }
}

/// A server's `Retry-After` in seconds, as a duration: a number the clock cannot hold
/// (`1e20`) is read as the longest wait there is ([`MAX_BACKOFF_MS`]) before the client's own
/// cap applies; a negative or non-numeric one (an HTTP date) is ignored.
fn retry_after(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok()?;
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    let cap = MAX_BACKOFF_MS as f64 / 1000.0;
    Some(Duration::from_secs_f64(seconds.min(cap)))
}

/// The API key: the named variable (which must then be set and non-empty), else
/// `OPENAI_API_KEY` if set.
pub fn api_key(variable: Option<&str>) -> Result<Option<String>, HttpError> {
    let read = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    match variable {
        Some(name) => read(name).map(Some).ok_or_else(|| {
            HttpError::Config(format!(
                "api_key_env names the environment variable {name}, which is not set"
            ))
        }),
        None => Ok(read(DEFAULT_KEY_VARIABLE)),
    }
}

/// Why a request (or the options or API key behind a [`Client`]) failed. Every variant but
/// `Config` names the address and how many attempts were made before giving up.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Options out of range, or `api_key_env` naming a variable that is not set; no request
    /// was sent.
    #[error("{0}")]
    Config(String),
    /// The server answered with a status outside 200..300: a 4xx other than 408/429 at once,
    /// or a 408, 429 or 5xx once the retries ran out.
    #[error("{url}: HTTP {status} after {attempts} attempt(s): {body}")]
    Status {
        /// The address requested.
        url: String,
        /// The HTTP status code of the last answer.
        status: u16,
        /// The server's error body on one line, shortened to its first 2,000 bytes.
        body: String,
        /// Attempts made, the first included.
        attempts: usize,
    },
    /// No complete answer: a timeout, a refused, reset or dropped connection or a body cut off
    /// (retried), or a bad URL, TLS failure, unknown host or a body over the size limit (not
    /// retried).
    #[error("{url}: {message} after {attempts} attempt(s)")]
    Transport {
        /// The address requested.
        url: String,
        /// What the transport reported.
        message: String,
        /// Attempts made, the first included.
        attempts: usize,
    },
    /// A 2xx answer whose body was not JSON, or which the caller's check rejected, still so
    /// when the retries ran out.
    #[error("{url}: invalid response after {attempts} attempt(s): {message}")]
    Invalid {
        /// The address requested.
        url: String,
        /// Why the body was rejected (for non-JSON, with an excerpt of the body).
        message: String,
        /// Attempts made, the first included.
        attempts: usize,
    },
}

/// What one attempt came to.
enum Failure {
    /// Worth another attempt (after the wait, or the server's `Retry-After`).
    Retry(HttpError, Option<Duration>),
    /// Another attempt would fail the same way.
    Final(HttpError),
}

/// A client shared by the threads of one backend (the connection pool is shared too).
pub struct Client {
    agent: ureq::Agent,
    key: Option<String>,
    options: HttpOptions,
    retried: AtomicUsize,
    /// [`REPORT_EVERY`] (shorter in tests).
    report_every: Duration,
}

impl Client {
    /// Reads the API key as [`api_key`] does.
    pub fn new(options: &HttpOptions) -> Result<Self, HttpError> {
        options.validate()?;
        let key = api_key(options.api_key_env.as_deref())?;
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(options.timeout_s)))
            .http_status_as_error(false)
            // One idle connection per request in flight, so concurrent requests reuse them.
            .max_idle_connections_per_host(64)
            .max_idle_connections(64)
            .build()
            .new_agent();
        Ok(Client {
            agent,
            key,
            options: options.clone(),
            retried: AtomicUsize::new(0),
            report_every: REPORT_EVERY,
        })
    }

    /// Retries made so far by all requests of this client.
    pub fn retries(&self) -> usize {
        self.retried.load(Ordering::Relaxed)
    }

    /// `GET url` as JSON, retried like [`Client::post_json`].
    pub fn get_json(&self, url: &str) -> Result<Value, HttpError> {
        self.with_retries(url, |attempts| {
            let mut request = self.agent.get(url);
            if let Some(key) = &self.key {
                request = request.header("Authorization", format!("Bearer {key}"));
            }
            self.finish(url, request.call(), attempts, &mut |v| Ok(v))
        })
    }

    /// `POST url` with a JSON body; the parsed reply goes through `check`, whose `Err` (a
    /// reply that is well-formed HTTP but wrong: missing fields, impossible numbers) is
    /// retried like a 5xx. A 4xx other than 408/429 is returned at once.
    pub fn post_json<T>(
        &self,
        url: &str,
        body: &Value,
        mut check: impl FnMut(Value) -> Result<T, String>,
    ) -> Result<T, HttpError> {
        let body = body.to_string();
        self.with_retries(url, |attempts| {
            let mut request = self
                .agent
                .post(url)
                .header("Content-Type", "application/json");
            if let Some(key) = &self.key {
                request = request.header("Authorization", format!("Bearer {key}"));
            }
            self.finish(url, request.send(body.as_str()), attempts, &mut check)
        })
    }

    fn with_retries<T>(
        &self,
        url: &str,
        mut attempt: impl FnMut(usize) -> Result<T, Failure>,
    ) -> Result<T, HttpError> {
        let current = AtomicUsize::new(1);
        self.watched(url, &current, || {
            let mut attempts = 0;
            loop {
                attempts += 1;
                current.store(attempts, Ordering::Relaxed);
                match attempt(attempts) {
                    Ok(v) => return Ok(v),
                    Err(Failure::Final(e)) => return Err(e),
                    Err(Failure::Retry(e, _)) if attempts > self.options.retries => return Err(e),
                    Err(Failure::Retry(_, retry_after)) => {
                        self.retried.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(self.options.backoff(attempts, retry_after));
                    }
                }
            }
        })
    }

    /// Runs `request`, reporting every [`REPORT_EVERY`] that it is still waiting: which
    /// address, for how long, which attempt, and when it gives up. A server that accepts and
    /// never answers is then a line every 30 s and an error after [`HttpOptions::longest_wait`],
    /// never a silent wait.
    fn watched<T>(&self, url: &str, attempt: &AtomicUsize, request: impl FnOnce() -> T) -> T {
        let (done, wait) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let started = Instant::now();
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    wait.recv_timeout(self.report_every)
                {
                    report(&format!(
                        "waiting for {url}: no answer yet after {}s (attempt {} of {}, each up \
                         to {}s); gives up after at most {}s",
                        started.elapsed().as_secs(),
                        attempt.load(Ordering::Relaxed),
                        self.options.retries + 1,
                        self.options.timeout_s,
                        self.options.longest_wait().as_secs()
                    ));
                }
            });
            let result = request();
            drop(done);
            result
        })
    }

    fn finish<T>(
        &self,
        url: &str,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        attempts: usize,
        check: &mut dyn FnMut(Value) -> Result<T, String>,
    ) -> Result<T, Failure> {
        let transport = |e: ureq::Error| {
            let error = HttpError::Transport {
                url: url.to_string(),
                message: transport_message(&e),
                attempts,
            };
            if transient(&e) {
                Failure::Retry(error, None)
            } else {
                Failure::Final(error)
            }
        };
        let mut response = sent.map_err(transport)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after);
        let text = response
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_string()
            .map_err(transport)?;
        if !(200..300).contains(&status) {
            let error = HttpError::Status {
                url: url.to_string(),
                status,
                body: excerpt(&text),
                attempts,
            };
            return Err(if matches!(status, 408 | 429 | 500..=599) {
                Failure::Retry(error, retry_after)
            } else {
                Failure::Final(error)
            });
        }
        let invalid = |message: String| {
            Failure::Retry(
                HttpError::Invalid {
                    url: url.to_string(),
                    message,
                    attempts,
                },
                None,
            )
        };
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| invalid(format!("not JSON ({e}): {}", excerpt(&text))))?;
        check(value).map_err(invalid)
    }
}

/// Transport failures a later attempt can get past: timeouts, refused, reset or dropped
/// connections, a reply cut off mid-way. Not: bad URLs, TLS failures, unknown hosts.
fn transient(e: &ureq::Error) -> bool {
    matches!(
        e,
        ureq::Error::Io(_)
            | ureq::Error::Timeout(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::Protocol(_)
            | ureq::Error::BodyStalled
    )
}

fn transport_message(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => format!("no complete response in time ({e})"),
        _ => e.to_string(),
    }
}

/// A server's body on one line, shortened.
fn excerpt(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.len() <= BODY_EXCERPT {
        return line;
    }
    let mut end = BODY_EXCERPT;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// Joins a base URL and a path, so `http://h:1`, `http://h:1/` and `http://h:1/v1` (with
/// `path` = `v1/models`) all name one address.
pub fn endpoint(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/{}", path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    /// Answers each connection with the next canned (status, headers, body); `None` closes
    /// the connection without a reply. Returns the request bodies seen.
    fn serve(
        replies: Vec<Option<(u16, &'static str, String)>>,
    ) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for reply in replies {
                let (stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                let mut headers = String::new();
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    headers.push_str(&line);
                }
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).unwrap();
                seen.push(format!("{headers}\n{}", String::from_utf8(body).unwrap()));
                let Some((status, extra, body)) = reply else {
                    continue;
                };
                let mut stream = stream;
                write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
            seen
        });
        (url, handle)
    }

    fn fast() -> HttpOptions {
        HttpOptions {
            timeout_s: 5.0,
            retries: 3,
            backoff_ms: 1,
            max_backoff_ms: 10,
            api_key_env: None,
        }
    }

    #[test]
    fn retries_drops_5xx_429_and_rejected_bodies_then_succeeds() {
        let (url, server) = serve(vec![
            None,
            Some((503, "Retry-After: 0\r\n", "overloaded".into())),
            Some((200, "", "{\"truncated\": ".into())),
            Some((200, "", "{\"ok\": 1}".into())),
        ]);
        let client = Client::new(&fast()).unwrap();
        let got = client
            .post_json(&url, &serde_json::json!({"x": 1}), |v| {
                v["ok"].as_u64().ok_or("no ok".to_string())
            })
            .unwrap();
        assert_eq!((got, client.retries()), (1, 3));
        server.join().unwrap();
    }

    #[test]
    fn a_4xx_is_final_and_keeps_the_servers_body() {
        let (url, server) = serve(vec![Some((
            400,
            "",
            "{\"error\": \"logprobs must be at most 20\"}".into(),
        ))]);
        let client = Client::new(&fast()).unwrap();
        let err = client
            .post_json(&url, &serde_json::json!({}), |_| Ok(()))
            .unwrap_err();
        assert!(
            matches!(
                &err,
                HttpError::Status {
                    status: 400,
                    attempts: 1,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("logprobs must be at most 20"));
        server.join().unwrap();
    }

    #[test]
    fn gives_up_after_the_retries_with_the_last_body() {
        let replies = (0..4)
            .map(|i| Some((500, "", format!("boom {i}"))))
            .collect();
        let (url, server) = serve(replies);
        let err = Client::new(&fast())
            .unwrap()
            .get_json(&url)
            .unwrap_err()
            .to_string();
        assert!(err.contains("HTTP 500 after 4 attempt(s): boom 3"), "{err}");
        server.join().unwrap();
    }

    #[test]
    fn a_slow_answer_times_out_and_is_retried() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            // First connection: never answered in time. Second: answered.
            let (slow, _) = listener.accept().unwrap();
            let (fast, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(fast.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap() > 2 {
                line.clear();
            }
            let mut fast = fast;
            write!(
                fast,
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
            )
            .unwrap();
            drop(slow);
        });
        let options = HttpOptions {
            timeout_s: 0.3,
            ..fast()
        };
        let client = Client::new(&options).unwrap();
        assert!(client.get_json(&url).unwrap().is_object());
        assert_eq!(client.retries(), 1);
        server.join().unwrap();
    }

    #[test]
    fn the_key_comes_from_the_named_variable_and_never_into_messages() {
        // SAFETY: only this test reads or writes this variable.
        unsafe { std::env::set_var("PSTAT_HTTP_TEST_KEY", "sk-secret") };
        let (url, server) = serve(vec![Some((401, "", "bad key".into()))]);
        let options = HttpOptions {
            api_key_env: Some("PSTAT_HTTP_TEST_KEY".into()),
            ..fast()
        };
        let err = Client::new(&options)
            .unwrap()
            .get_json(&url)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HTTP 401") && !err.contains("sk-secret"),
            "{err}"
        );
        let seen = server.join().unwrap();
        assert!(
            seen[0]
                .to_ascii_lowercase()
                .contains("authorization: bearer sk-secret")
        );
        let missing = HttpOptions {
            api_key_env: Some("PSTAT_HTTP_TEST_UNSET".into()),
            ..fast()
        };
        let err = Client::new(&missing).err().unwrap().to_string();
        assert!(err.contains("PSTAT_HTTP_TEST_UNSET"), "{err}");
    }

    #[test]
    fn https_is_spoken() {
        // A plain-TCP listener: the client must open with a TLS handshake (and fail on it, not
        // on an unsupported scheme).
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut hello = [0u8; 1];
            stream.read_exact(&mut hello).unwrap();
            stream.write_all(b"HTTP/1.1 400 not tls\r\n\r\n").unwrap();
            hello[0]
        });
        let client = Client::new(&fast()).unwrap();
        let err = client
            .get_json(&format!("https://127.0.0.1:{port}/v1/models"))
            .unwrap_err();
        // 0x16: a TLS handshake record.
        assert_eq!(server.join().unwrap(), 0x16);
        assert!(matches!(err, HttpError::Transport { .. }), "{err}");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_honours_retry_after() {
        let o = HttpOptions {
            backoff_ms: 100,
            max_backoff_ms: 1000,
            ..HttpOptions::default()
        };
        let ms = |d: Duration| d.as_millis();
        assert!((50..=100).contains(&ms(o.backoff(1, None))));
        assert!((200..=400).contains(&ms(o.backoff(3, None))));
        assert!((500..=1000).contains(&ms(o.backoff(9, None))));
        let after = Some(Duration::from_secs(60));
        assert!((500..=1000).contains(&ms(o.backoff(1, after))));
        assert!(
            HttpOptions {
                timeout_s: 0.0,
                ..o
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn any_duration_is_validated_and_a_huge_retry_after_is_capped() {
        for timeout_s in [
            1e300,
            f64::INFINITY,
            f64::NAN,
            -1.0,
            0.0,
            MAX_TIMEOUT_S * 2.0,
        ] {
            let options = HttpOptions {
                timeout_s,
                ..HttpOptions::default()
            };
            let err = Client::new(&options).err().unwrap().to_string();
            assert!(err.contains("timeout_s"), "{err}");
        }
        let huge = HttpOptions {
            max_backoff_ms: u64::MAX,
            backoff_ms: 1,
            ..HttpOptions::default()
        };
        assert!(
            huge.validate()
                .unwrap_err()
                .to_string()
                .contains("max_backoff_ms")
        );
        for header in ["1e20", "1e308", "inf", "18446744073709551616"] {
            let wait = retry_after(header).unwrap();
            assert!(wait <= Duration::from_millis(MAX_BACKOFF_MS), "{header}");
        }
        assert_eq!(retry_after("NaN"), None);
        assert_eq!(retry_after("-3"), None);
        // A 503 with `Retry-After: 1e20` waits at most max_backoff_ms, then retries.
        let (url, server) = serve(vec![
            Some((503, "Retry-After: 1e20\r\n", "busy".into())),
            Some((200, "", "{}".into())),
        ]);
        let started = Instant::now();
        assert!(Client::new(&fast()).unwrap().get_json(&url).is_ok());
        assert!(started.elapsed() < Duration::from_secs(5));
        server.join().unwrap();
    }

    #[test]
    fn a_server_that_never_answers_is_reported_and_given_up_on() {
        let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        set_reporter(Some(Arc::new(move |line: &str| {
            sink.lock().unwrap().push(line.to_string())
        })));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Accepts and never answers.
        let held = std::thread::spawn(move || {
            let mut open = Vec::new();
            for _ in 0..2 {
                open.push(listener.accept().unwrap().0);
            }
            std::thread::sleep(Duration::from_secs(2));
        });
        let options = HttpOptions {
            timeout_s: 0.4,
            retries: 1,
            ..fast()
        };
        let mut client = Client::new(&options).unwrap();
        client.report_every = Duration::from_millis(100);
        let err = client.get_json(&url);
        set_reporter(None);
        let err = err.unwrap_err().to_string();
        assert!(err.contains("after 2 attempt(s)"), "{err}");
        let lines = lines.lock().unwrap();
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("waiting for {url}"))
                    && l.contains("gives up after at most")),
            "{lines:?}"
        );
        held.join().unwrap();
    }

    #[test]
    fn endpoints_join() {
        for base in [
            "http://h:1",
            "http://h:1/",
            "http://h:1/v1",
            "http://h:1/v1/",
        ] {
            assert_eq!(endpoint(base, "v1/models"), "http://h:1/v1/models");
        }
    }
}
