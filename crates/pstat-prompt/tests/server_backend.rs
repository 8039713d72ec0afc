//! The server backend against local fake servers (one that takes token ids and keys
//! log-probabilities by id, as vLLM does; one that takes text only, keys by text and adds its
//! own BOS, as llama-cpp-python's does), directly and through the fault-injecting proxy; and
//! one that caps `logprobs` at 20 and answers `prompt_logprobs` for batched token-id prompts,
//! in the JSON shape vLLM's completions endpoint documents.

mod support;

use pstat_http::HttpOptions;
use pstat_prompt::server::{LogprobRequest, PromptInput, ServerConfig, ServerScorer};
use pstat_prompt::{EncodedPrompts, OptionScorer, PromptCodec, PromptError};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::fault_proxy::{Fault, FaultProxy};

const BOS: u32 = 1;
const BOS_TEXT: &str = "<s>";
/// " a", " b", " c" are single tokens; every other character is its own token.
const SPACED: u32 = 1000;

/// A byte-level tokenizer with a BOS that a chat template may write as text.
struct Codec;

fn char_id(c: char) -> u32 {
    c as u32 + 100
}

fn tokenize(text: &str) -> Vec<u32> {
    let rest = text.strip_prefix(BOS_TEXT).unwrap_or(text);
    let mut ids = vec![BOS];
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            (' ', Some(&l @ ('a' | 'b' | 'c'))) => {
                chars.next();
                ids.push(SPACED + (l as u32 - 'a' as u32));
            }
            _ => ids.push(char_id(c)),
        }
    }
    ids
}

fn piece(id: u32) -> String {
    match id {
        BOS => BOS_TEXT.into(),
        SPACED.. => format!(" {}", char::from(b'a' + (id - SPACED) as u8)),
        _ => char::from_u32(id - 100).unwrap().to_string(),
    }
}

impl PromptCodec for Codec {
    fn render_chat(&self, user: &str, prefill: &str) -> Result<String, PromptError> {
        Ok(format!("{BOS_TEXT}{user}\n{prefill}"))
    }
    fn encode_prompt(&self, rendered: &str) -> Result<Vec<u32>, PromptError> {
        Ok(tokenize(rendered))
    }
    fn encode_option(&self, text: &str) -> Result<Vec<u32>, PromptError> {
        Ok(tokenize(text))
    }
    fn piece(&self, id: u32) -> Result<String, PromptError> {
        Ok(piece(id))
    }
}

/// The fake model: p(a), p(b), p(c) from a hash of the statement, split between the bare and
/// the spaced letter; thirty filler tokens outrank the bare "c" (so it is missing from a
/// top 20), and the rest of the mass is elsewhere.
fn next_token(statement: &str) -> Vec<(u32, f64)> {
    let h = statement.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    let u = |k: u32| ((h >> (k * 16)) & 0xffff) as f64 / 65535.0;
    let (pa, pb, pc) = (0.05 + 0.25 * u(0), 0.05 + 0.25 * u(1), 0.02 + 0.2 * u(2));
    let mut top = vec![
        (char_id('a'), 0.3 * pa),
        (SPACED, 0.7 * pa),
        (char_id('b'), 0.4 * pb),
        (SPACED + 1, 0.6 * pb),
        (char_id('c'), 0.001 * pc),
        (SPACED + 2, 0.999 * pc),
    ];
    top.extend((0..30).map(|i| (char_id('A') + i, 0.005)));
    top
}

fn expected(statement: &str) -> [f64; 3] {
    let mut p = [0.0; 3];
    for (id, q) in next_token(statement) {
        let j = match id {
            SPACED.. => (id - SPACED) as usize,
            _ if id == char_id('a') => 0,
            _ if id == char_id('b') => 1,
            _ if id == char_id('c') => 2,
            _ => continue,
        };
        p[j] += q;
    }
    p
}

fn statement_of(text: &str) -> String {
    text.split_once("correct?\n")
        .map(|(_, rest)| rest.lines().next().unwrap_or("").to_string())
        .unwrap_or_default()
}

#[derive(Clone, Copy)]
struct Behaviour {
    /// Takes token ids (else answers 422 to them, as a pydantic server does).
    tokens: bool,
    /// Adds a BOS before the text it tokenizes.
    adds_bos: bool,
    /// Reports usage.prompt_tokens.
    usage: bool,
    /// Time to answer one request.
    latency: Duration,
    /// vLLM's `--max-logprobs`: a larger `logprobs` is answered 400.
    max_logprobs: Option<usize>,
}

struct FakeServer {
    addr: SocketAddr,
    in_flight_max: Arc<AtomicUsize>,
    texts: Arc<std::sync::Mutex<Vec<String>>>,
}

impl FakeServer {
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn answer(
    behaviour: Behaviour,
    request: &Value,
    texts: &std::sync::Mutex<Vec<String>>,
) -> (u16, Value) {
    if request.get("prompt_logprobs").is_some() {
        return prompt_logprobs_answer(request);
    }
    let (text, n_tokens) = match &request["prompt"] {
        Value::Array(ids) if behaviour.tokens => {
            let ids: Vec<u32> = ids.iter().map(|v| v.as_u64().unwrap() as u32).collect();
            let text: String = ids
                .iter()
                .filter(|&&i| i != BOS)
                .map(|&i| piece(i))
                .collect();
            (text, ids.len())
        }
        Value::Array(_) => {
            return (
                422,
                json!({"detail": [{"msg": "Input should be a valid string", "loc": ["body", "prompt"]}]}),
            );
        }
        Value::String(text) => {
            texts.lock().unwrap().push(text.clone());
            let ids = tokenize(text);
            // The tokenizer above reads a leading "<s>" as BOS and otherwise adds one; a
            // server that adds its own BOS to the text's tokens has one more.
            let n = if behaviour.adds_bos && text.starts_with(BOS_TEXT) {
                ids.len() + 1
            } else if behaviour.adds_bos {
                ids.len()
            } else {
                ids.len() - usize::from(!text.starts_with(BOS_TEXT))
            };
            (text.clone(), n)
        }
        other => panic!("unexpected prompt {other}"),
    };
    let n = request["logprobs"].as_u64().unwrap() as usize;
    if let Some(max) = behaviour.max_logprobs
        && n > max
    {
        return (
            400,
            json!({"object": "error", "type": "BadRequestError", "code": 400,
                "message": format!("Requested sample logprobs of {n}, which is greater than max allowed: {max}")}),
        );
    }
    let mut top = next_token(&statement_of(&text));
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    top.truncate(n);
    let top: serde_json::Map<String, Value> = top
        .into_iter()
        .map(|(id, p)| {
            let key = if behaviour.tokens {
                format!("token_id:{id}")
            } else {
                piece(id)
            };
            (key, json!(p.ln()))
        })
        .collect();
    let mut reply = json!({
        "model": request["model"],
        "choices": [{"text": " a", "logprobs": {"top_logprobs": [top]}}],
    });
    if behaviour.usage {
        reply["usage"] = json!({"prompt_tokens": n_tokens, "completion_tokens": 1});
    }
    (200, reply)
}

/// vLLM's reply to a batch of token-id prompts with `prompt_logprobs: 0`: per prompt a choice
/// whose `prompt_logprobs` has `null` for the first token and `{"<id>": {logprob, rank,
/// decoded_token}}` for each later one (here only the last, the option token, is meaningful).
fn prompt_logprobs_answer(request: &Value) -> (u16, Value) {
    let batch = request["prompt"].as_array().unwrap();
    let mut total = 0;
    let choices: Vec<Value> = batch
        .iter()
        .enumerate()
        .map(|(index, prompt)| {
            let ids: Vec<u32> = prompt
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            total += ids.len();
            let (&option, context) = ids.split_last().unwrap();
            let text: String = context
                .iter()
                .filter(|&&i| i != BOS)
                .map(|&i| piece(i))
                .collect();
            let p = next_token(&statement_of(&text))
                .into_iter()
                .find(|&(id, _)| id == option)
                .map_or(1e-9, |(_, p)| p);
            let mut logprobs = vec![Value::Null];
            logprobs.extend(ids[1..ids.len() - 1].iter().map(|&id| {
                json!({id.to_string(): {"logprob": -1.5, "rank": 3, "decoded_token": piece(id)}})
            }));
            logprobs.push(json!({option.to_string(): {"logprob": p.ln(), "rank": 40, "decoded_token": piece(option)}}));
            json!({"index": index, "text": " a", "logprobs": null, "finish_reason": "length",
                "prompt_logprobs": logprobs})
        })
        .collect();
    (
        200,
        json!({"object": "text_completion", "model": request["model"], "choices": choices,
            "usage": {"prompt_tokens": total, "completion_tokens": batch.len(), "total_tokens": total + batch.len()}}),
    )
}

fn serve_one(
    stream: TcpStream,
    behaviour: Behaviour,
    in_flight: &AtomicUsize,
    max: &AtomicUsize,
    texts: &std::sync::Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut stream = stream;
    loop {
        let mut start = String::new();
        if reader.read_line(&mut start)? == 0 {
            return Ok(());
        }
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        max.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(behaviour.latency);
        let (status, reply) = if start.starts_with("GET /v1/models") {
            (
                200,
                json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}),
            )
        } else if start.starts_with("POST /v1/completions") {
            answer(behaviour, &serde_json::from_slice(&body).unwrap(), texts)
        } else {
            (404, json!({"error": "not found"}))
        };
        in_flight.fetch_sub(1, Ordering::SeqCst);
        let reply = reply.to_string();
        write!(
            stream,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{reply}",
            reply.len()
        )?;
    }
}

fn fake_server(behaviour: Behaviour) -> FakeServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let in_flight_max = Arc::new(AtomicUsize::new(0));
    let texts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (f, m, t) = (in_flight.clone(), in_flight_max.clone(), texts.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let (f, m, t) = (f.clone(), m.clone(), t.clone());
            std::thread::spawn(move || {
                let _ = serve_one(stream.unwrap(), behaviour, &f, &m, &t);
            });
        }
    });
    FakeServer {
        addr,
        in_flight_max,
        texts,
    }
}

fn prompts(n: usize, chat: bool) -> EncodedPrompts {
    let texts = (0..n)
        .map(|i| {
            let body = format!("Context line.\nIs the following statement correct?\nStatement number {i} is here.\na. The statement is true.");
            if chat { format!("{BOS_TEXT}{body}\nThe final answer is") } else { format!("{body}\nThe final answer is") }
        })
        .collect();
    EncodedPrompts::new(&Codec, texts).unwrap()
}

fn config(url: &str, concurrency: usize) -> ServerConfig {
    ServerConfig {
        concurrency,
        http: HttpOptions {
            timeout_s: 2.0,
            retries: 4,
            backoff_ms: 5,
            max_backoff_ms: 50,
            api_key_env: None,
        },
        ..ServerConfig::new(url)
    }
}

fn check(prompts: &EncodedPrompts, got: &[pstat_prompt::OptionProbs]) {
    assert_eq!(got.len(), prompts.len());
    for (text, p) in prompts.texts.iter().zip(got) {
        let want = expected(&statement_of(text));
        for j in 0..3 {
            assert!(
                (p.p[j] - want[j]).abs() < 1e-9,
                "{text}: {:?} vs {want:?}",
                p.p
            );
        }
    }
}

const VLLM_LIKE: Behaviour = Behaviour {
    tokens: true,
    adds_bos: true,
    usage: true,
    latency: Duration::from_millis(30),
    max_logprobs: None,
};
const LLAMA_CPP_PYTHON_LIKE: Behaviour = Behaviour {
    tokens: false,
    adds_bos: true,
    usage: true,
    latency: Duration::from_millis(5),
    max_logprobs: None,
};

#[test]
fn token_ids_go_to_a_server_that_takes_them_with_n_requests_in_flight() {
    let server = fake_server(VLLM_LIKE);
    let mut scorer = ServerScorer::connect(&config(&server.url(), 4), &Codec).unwrap();
    assert_eq!(scorer.model_id(), "fake-model");
    assert!(scorer.identity().contains("fake-model"));
    let p = prompts(40, true);
    let mut progressed = 0;
    let got = scorer.score(&p, &mut |n| progressed += n).unwrap();
    check(&p, &got);
    assert_eq!(progressed, 40);
    // The " c"/"c" pair ranks below 30 fillers: the top-n grew, and no retry was needed.
    assert_eq!(scorer.retries(), 0);
    assert_eq!(server.in_flight_max.load(Ordering::SeqCst), 4);
    assert!(server.texts.lock().unwrap().is_empty(), "no text was sent");
}

#[test]
fn a_text_only_server_gets_text_without_a_second_bos() {
    let server = fake_server(LLAMA_CPP_PYTHON_LIKE);
    let mut scorer = ServerScorer::connect(&config(&server.url(), 3), &Codec).unwrap();
    for chat in [true, false] {
        let p = prompts(12, chat);
        check(&p, &scorer.score(&p, &mut |_| {}).unwrap());
    }
    let texts = server.texts.lock().unwrap();
    // The chat template's "<s>" is dropped once the server's count shows it adds its own.
    assert!(
        texts.iter().skip(1).all(|t| !t.starts_with(BOS_TEXT)),
        "{:?}",
        &texts[..3]
    );
}

#[test]
fn a_text_only_server_that_cannot_be_checked_is_refused() {
    let server = fake_server(Behaviour {
        usage: false,
        ..LLAMA_CPP_PYTHON_LIKE
    });
    let mut scorer = ServerScorer::connect(&config(&server.url(), 2), &Codec).unwrap();
    let err = scorer
        .score(&prompts(3, false), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("prompt 1 of 3") && err.contains("token count"),
        "{err}"
    );
    assert!(
        err.contains("Input should be a valid string"),
        "the 422 body is kept: {err}"
    );
    let forced = ServerConfig {
        prompt: PromptInput::Tokens,
        ..config(&server.url(), 2)
    };
    let err = ServerScorer::connect(&forced, &Codec)
        .unwrap()
        .score(&prompts(2, false), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("HTTP 422"), "{err}");
}

#[test]
fn faults_cost_retries_never_a_wrong_or_missing_judgment() {
    for behaviour in [VLLM_LIKE, LLAMA_CPP_PYTHON_LIKE] {
        let server = fake_server(behaviour);
        let schedule = vec![
            Fault::None,
            Fault::Drop,
            Fault::None,
            Fault::Status500,
            Fault::Slow,
            Fault::Hang,
            Fault::None,
            Fault::Malformed,
            Fault::None,
            Fault::AboveOne,
            Fault::None,
        ];
        let proxy = FaultProxy::start(
            server.addr,
            schedule,
            Duration::from_secs(3),
            Duration::from_millis(300),
        );
        // Four workers share one fault schedule, so one prompt can meet several faults in a
        // row; enough retries that none runs out (each fault still costs exactly one).
        let mut faulty = config(&proxy.url, 4);
        faulty.http.retries = 12;
        let mut scorer = ServerScorer::connect(&faulty, &Codec).unwrap();
        let p = prompts(30, true);
        let got = scorer.score(&p, &mut |_| {}).unwrap();
        check(&p, &got);
        assert!(proxy.spoiled() >= 10, "{} faults", proxy.spoiled());
        assert_eq!(scorer.retries(), proxy.spoiled(), "one retry per fault");
    }
}

#[test]
fn a_failing_server_is_an_error_naming_the_prompt_and_keeping_the_body() {
    let server = fake_server(VLLM_LIKE);
    let proxy = FaultProxy::start(
        server.addr,
        vec![Fault::None, Fault::Status500],
        Duration::from_secs(3),
        Duration::ZERO,
    );
    let mut cfg = config(&proxy.url, 1);
    cfg.http.retries = 0;
    let mut scorer = ServerScorer::connect(&cfg, &Codec).unwrap();
    let err = scorer
        .score(&prompts(3, true), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("prompt 1 of 3 (statement \"Statement number 0 is here.\")"),
        "{err}"
    );
    assert!(
        err.contains("HTTP 500") && err.contains("injected fault"),
        "{err}"
    );
}

#[test]
fn two_servers_never_share_cached_answers() {
    let (a, b) = (fake_server(VLLM_LIKE), fake_server(VLLM_LIKE));
    let ka = ServerScorer::connect(&config(&a.url(), 1), &Codec)
        .unwrap()
        .identity();
    let kb = ServerScorer::connect(&config(&b.url(), 1), &Codec)
        .unwrap()
        .identity();
    assert_ne!(ka, kb);
    let wrong = ServerConfig {
        model: Some("other".into()),
        ..config(&a.url(), 1)
    };
    let err = ServerScorer::connect(&wrong, &Codec)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("does not serve model \"other\"") && err.contains("fake-model"),
        "{err}"
    );
}

#[test]
fn prompt_logprobs_need_no_max_logprobs_on_a_vllm_like_server() {
    let server = fake_server(Behaviour {
        max_logprobs: Some(20),
        ..VLLM_LIKE
    });
    // The top-n request runs into vLLM's default cap: the " c"/"c" pair ranks below 20.
    let err = ServerScorer::connect(&config(&server.url(), 2), &Codec)
        .unwrap()
        .score(&prompts(2, true), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HTTP 400") && err.contains("max allowed: 20"),
        "{err}"
    );
    let exact = ServerConfig {
        logprobs: LogprobRequest::Prompt,
        ..config(&server.url(), 4)
    };
    let mut scorer = ServerScorer::connect(&exact, &Codec).unwrap();
    let p = prompts(25, true);
    check(&p, &scorer.score(&p, &mut |_| {}).unwrap());
    assert_eq!(scorer.retries(), 0);
    assert_eq!(server.in_flight_max.load(Ordering::SeqCst), 4);
}
