//! The terminal face of a run's progress: a bar per unit of work (indicatif) and stage
//! headings with the time since the command started, all on stderr (stdout carries
//! machine-readable output).

use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

pub struct Bars {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Bars {
    pub fn new() -> Self {
        Bars {
            bar: None,
            started: Instant::now(),
        }
    }
}

impl pstat_prompt::Progress for Bars {
    fn start(&mut self, unit: &str, n: usize) {
        let bar = ProgressBar::new(n as u64).with_message(unit.to_string());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:32} {bar:30} {pos}/{len} {elapsed_precise} eta {eta}",
            )
            .expect("valid template"),
        );
        self.bar = Some(bar);
    }
    fn advance(&mut self, n: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
    }
    fn finish(&mut self, resumed: bool) {
        if let Some(bar) = self.bar.take() {
            if resumed {
                bar.set_position(bar.length().unwrap_or(0));
                bar.finish_with_message(format!("{} (stored)", bar.message()));
            } else {
                bar.finish_and_clear();
            }
        }
    }
}

impl pstat_study::Progress for Bars {
    fn stage(&mut self, name: &str) {
        let elapsed = self.started.elapsed().as_secs();
        eprintln!("== [{:02}:{:02}] {name}", elapsed / 60, elapsed % 60);
    }
    fn note(&mut self, message: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{message}")),
            None => eprintln!("{message}"),
        }
    }
}
