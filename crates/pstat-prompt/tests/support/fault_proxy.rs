//! A fault-injecting HTTP proxy for the server backend's tests: it forwards each request to
//! the real server on a fresh connection, and on a fixed schedule spoils the exchange instead:
//! drops the connection, answers 500, holds the answer past the client's timeout, answers
//! slowly (within it), truncates the JSON, or rewrites the top log-probabilities so that they
//! sum above 1. Every spoiled exchange is counted; a client that survives them all made
//! exactly that many retries.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Read the request, close without a reply.
    Drop,
    /// `500 Internal Server Error` with a JSON body.
    Status500,
    /// No reply before the client's timeout, then close.
    Hang,
    /// The real reply, after a delay shorter than the timeout (costs no retry).
    Slow,
    /// The real reply cut in half.
    Malformed,
    /// The real reply with every top log-probability set to ln 0.5.
    AboveOne,
}

pub struct FaultProxy {
    pub url: String,
    spoiled: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl FaultProxy {
    /// Request n (counted from 0 across all connections) gets `schedule[n % len]`; `hang` is
    /// how long a Hang holds the connection (more than the client's timeout), `slow` how long
    /// a Slow answer waits.
    pub fn start(
        upstream: SocketAddr,
        schedule: Vec<Fault>,
        hang: Duration,
        slow: Duration,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let spoiled = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (s, r) = (spoiled.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (s, r, schedule) = (s.clone(), r.clone(), schedule.clone());
                std::thread::spawn(move || {
                    let _ = handle(stream, upstream, &schedule, &s, &r, hang, slow);
                });
            }
        });
        FaultProxy {
            url,
            spoiled,
            requests,
        }
    }

    /// Exchanges spoiled so far: each must cost the client one retry (a Slow answer or an
    /// AboveOne reply without log-probabilities is not spoiled).
    pub fn spoiled(&self) -> usize {
        self.spoiled.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// One HTTP/1.1 message: the head (start line and headers, without the blank line) and body.
fn read_message(reader: &mut impl BufRead, until_eof: bool) -> std::io::Result<(String, Vec<u8>)> {
    let mut head = String::new();
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse::<usize>().ok();
        }
        head.push_str(&line);
    }
    let mut body = Vec::new();
    match length {
        Some(n) => {
            body.resize(n, 0);
            reader.read_exact(&mut body)?;
        }
        None if until_eof => {
            reader.read_to_end(&mut body)?;
        }
        None => {}
    }
    Ok((head, body))
}

/// The head with `Content-Length` and `Connection` replaced.
fn rewrite_head(head: &str, length: usize) -> String {
    let mut out: Vec<&str> = head
        .split("\r\n")
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            !l.is_empty()
                && !l.starts_with("content-length:")
                && !l.starts_with("connection:")
                && !l.starts_with("transfer-encoding:")
        })
        .collect();
    let length = format!("Content-Length: {length}");
    out.push(&length);
    out.push("Connection: close");
    format!("{}\r\n\r\n", out.join("\r\n"))
}

/// Sets every non-integer number under a `top_logprobs` key to ln 0.5; returns how many.
fn inflate(value: &mut serde_json::Value, inside: bool) -> usize {
    match value {
        serde_json::Value::Object(map) => map
            .iter_mut()
            .map(|(k, v)| inflate(v, inside || k == "top_logprobs"))
            .sum(),
        serde_json::Value::Array(items) => items.iter_mut().map(|v| inflate(v, inside)).sum(),
        serde_json::Value::Number(n) if inside && n.is_f64() => {
            *value = serde_json::json!(0.5f64.ln());
            1
        }
        _ => 0,
    }
}

fn handle(
    client: TcpStream,
    upstream: SocketAddr,
    schedule: &[Fault],
    spoiled: &AtomicUsize,
    requests: &AtomicUsize,
    hang: Duration,
    slow: Duration,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    let (head, body) = read_message(&mut reader, false)?;
    let n = requests.fetch_add(1, Ordering::SeqCst);
    let fault = schedule[n % schedule.len()];
    if matches!(fault, Fault::Drop | Fault::Hang | Fault::Status500) {
        spoiled.fetch_add(1, Ordering::SeqCst);
    }
    match fault {
        Fault::Drop => return Ok(()),
        Fault::Hang => {
            std::thread::sleep(hang);
            return Ok(());
        }
        Fault::Status500 => {
            let body = r#"{"error": "injected fault: internal server error"}"#;
            write!(
                client,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return Ok(());
        }
        _ => {}
    }
    let mut server = TcpStream::connect(upstream)?;
    server.write_all(rewrite_head(&head, body.len()).as_bytes())?;
    server.write_all(&body)?;
    let (reply_head, mut reply) = read_message(&mut BufReader::new(server), true)?;
    // A refusal (4xx) passes unspoiled: the client is right not to retry it.
    let ok = reply_head.split(' ').nth(1) == Some("200");
    match fault {
        Fault::Slow => std::thread::sleep(slow),
        Fault::Malformed if ok => {
            spoiled.fetch_add(1, Ordering::SeqCst);
            reply.truncate(reply.len() / 2);
        }
        Fault::AboveOne if ok => {
            if let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&reply) {
                // Three or more probabilities of 0.5: their sum is above 1.
                if inflate(&mut value, false) >= 3 {
                    spoiled.fetch_add(1, Ordering::SeqCst);
                }
                reply = value.to_string().into_bytes();
            }
        }
        _ => {}
    }
    client.write_all(rewrite_head(&reply_head, reply.len()).as_bytes())?;
    client.write_all(&reply)?;
    client.flush()
}
