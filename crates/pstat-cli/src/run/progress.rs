//! Progress bars: one per unit of work, with elapsed time and an ETA.

use indicatif::{ProgressBar, ProgressStyle};

pub fn bar(len: u64, prefix: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{prefix:.bold} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb.set_prefix(prefix.to_string());
    pb
}

static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// A stage heading on stderr (kept out of stdout, which carries machine-readable output), with
/// the time since the run started.
pub fn stage(name: &str) {
    let elapsed = START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs();
    eprintln!("== [{:02}:{:02}] {name}", elapsed / 60, elapsed % 60);
}
