//! llama-cpp-python's OpenAI-compatible server, started on a free local port for a test or a
//! benchmark, on the GGUF re-quantized to F32 by llama.cpp itself (the embedded runtime
//! computes with dequantized f32 weights, so both compute the same function).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Python with `llama_cpp[server]`: `PSTAT_TEST_LLAMA_SERVER`. Without it the caller
/// records a skip, except under CI=true, where that is a failure.
pub fn python() -> Option<String> {
    std::env::var("PSTAT_TEST_LLAMA_SERVER").ok().or_else(|| {
        pstat_testkit::missing(
            "PSTAT_TEST_LLAMA_SERVER must name a Python with llama_cpp[server] (scripts/test installs one)",
        )
    })
}

/// Kills the server when dropped, however the caller ends.
pub struct Server {
    child: Child,
    pub url: String,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server process's CPU seconds so far (user + system, from /proc).
    pub fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(vec![], |(_, r)| r.split_whitespace().collect());
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (ticks(11) + ticks(12)) / 100.0
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The GGUF re-quantized to F32 by llama.cpp (`llama_model_quantize`, ftype ALL_F32).
pub fn requantize_f32(python: &str, src: &Path, dst: &Path) {
    let script = "import ctypes, sys, llama_cpp\n\
p = llama_cpp.llama_model_quantize_default_params()\n\
p.ftype = llama_cpp.LLAMA_FTYPE_ALL_F32\n\
p.allow_requantize = True\n\
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))\n";
    let status = Command::new(python)
        .args(["-c", script])
        .arg(src)
        .arg(dst)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running llama_model_quantize");
    assert!(
        status.success(),
        "re-quantizing {} to F32 failed",
        src.display()
    );
}

/// Starts the server with an f32 KV cache (as the embedded runtime keeps it) and `threads`
/// threads, and waits until it lists its model.
pub fn start(python: &str, model: &Path, threads: usize, log: &Path) -> Server {
    let port = free_port();
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(python)
        .args(["-m", "llama_cpp.server", "--model"])
        .arg(model)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--n_ctx",
            "4096",
        ])
        // GGML_TYPE_F32 for the KV cache.
        .args(["--type_k", "0", "--type_v", "0"])
        .args([
            "--n_threads",
            &threads.to_string(),
            "--n_threads_batch",
            &threads.to_string(),
        ])
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("starting llama_cpp.server");
    let url = format!("http://127.0.0.1:{port}");
    let server = Server { child, url, port };
    let client = pstat_http::Client::new(&pstat_http::HttpOptions {
        retries: 0,
        timeout_s: 5.0,
        ..Default::default()
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while client
        .get_json(&format!("{}/v1/models", server.url))
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the server did not come up on port {port}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    server
}
