//! The terminal face of a run's progress: bars (indicatif) on stderr when it is a terminal
//! (stdout carries machine-readable output). Anywhere else the run prints
//! [`pstat_study::progress::Lines`]; both keep `run.log` in the out folder. Either way
//! [`Resumable`] keeps where the run stands, for the line an interrupted run prints
//! ([`interrupted`]).

use indicatif::{ProgressBar, ProgressStyle};
use pstat_study::RunStatus;
use pstat_study::progress::{RunLog, unit_line};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// The out folder of the run in progress and where it stands, for [`interrupted`].
static RUN: Mutex<Option<(PathBuf, Option<RunStatus>)>> = Mutex::new(None);

/// The one line a command stopped by Ctrl-C or SIGTERM prints: what is stored and how to
/// resume.
pub fn interrupted() -> String {
    let again: Vec<String> = std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect();
    let again = again.join(" ");
    let run = RUN.lock().map(|r| r.clone()).unwrap_or_default();
    match run {
        Some((out, Some(status))) => format!(
            "interrupted: {} of {} units are stored in {} (the unit in flight keeps its last checkpoint); run `{again}` again to resume",
            status.done,
            status.total,
            out.display()
        ),
        Some((out, None)) => format!(
            "interrupted: what is computed is stored in {}; run `{again}` again to resume",
            out.display()
        ),
        None => format!("interrupted: `{again}` stopped before it finished"),
    }
}

/// Forwards to the progress it wraps, keeping where the run into `out` stands for
/// [`interrupted`].
pub struct Resumable {
    inner: Box<dyn pstat_study::Progress>,
}

impl Resumable {
    pub fn new(out: &Path, inner: Box<dyn pstat_study::Progress>) -> Self {
        if let Ok(mut run) = RUN.lock() {
            *run = Some((out.to_path_buf(), None));
        }
        Resumable { inner }
    }
}

impl pstat_prompt::Progress for Resumable {
    fn start(&mut self, unit: &str, n: usize) {
        self.inner.start(unit, n);
    }
    fn advance(&mut self, n: usize) {
        self.inner.advance(n);
    }
    fn finish(&mut self, resumed: bool) {
        self.inner.finish(resumed);
    }
    fn warning(&mut self, message: &str) {
        self.inner.warning(message);
    }
}

impl pstat_study::Progress for Resumable {
    fn stage(&mut self, name: &str) {
        self.inner.stage(name);
    }
    fn note(&mut self, message: &str) {
        self.inner.note(message);
    }
    fn unit(&mut self, key: &pstat_study::UnitKey) {
        self.inner.unit(key);
    }
    fn run_status(&mut self, status: &RunStatus) {
        if let Ok(mut run) = RUN.lock()
            && let Some((_, stored)) = run.as_mut()
        {
            *stored = Some(*status);
        }
        self.inner.run_status(status);
    }
}

fn clock(started: Instant) -> String {
    let s = started.elapsed().as_secs();
    format!("[{:02}:{:02}]", s / 60, s % 60)
}

pub struct Bars {
    bar: Option<ProgressBar>,
    started: Instant,
    unit_started: Instant,
    log: Option<RunLog>,
    run: Option<RunStatus>,
}

impl Bars {
    pub fn new() -> Self {
        Bars {
            bar: None,
            started: Instant::now(),
            unit_started: Instant::now(),
            log: None,
            run: None,
        }
    }

    /// Bars that also keep `<out>/run.log`.
    pub fn logging(out: &Path) -> Self {
        Bars {
            log: Some(RunLog::new(out)),
            ..Bars::new()
        }
    }

    fn log(&mut self, line: &str) {
        if let Some(log) = &mut self.log {
            log.line(line);
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
        self.unit_started = Instant::now();
    }
    fn advance(&mut self, n: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
    }
    fn finish(&mut self, resumed: bool) {
        if let Some(bar) = self.bar.take() {
            let n = bar.length().unwrap_or(0) as usize;
            let line = unit_line(
                &bar.message(),
                n,
                resumed,
                self.unit_started.elapsed(),
                self.run.as_ref(),
            );
            self.log(&line);
            if resumed {
                bar.set_position(n as u64);
                bar.finish_with_message(format!("{} (stored)", bar.message()));
            } else {
                bar.finish_and_clear();
            }
        }
    }
    fn warning(&mut self, message: &str) {
        pstat_study::Progress::note(self, &format!("warning: {message}"));
    }
}

impl pstat_study::Progress for Bars {
    fn stage(&mut self, name: &str) {
        let line = format!("== {} {name}", clock(self.started));
        eprintln!("{line}");
        self.log(&line);
    }
    fn note(&mut self, message: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{message}")),
            None => eprintln!("{message}"),
        }
        self.log(message);
    }
    fn run_status(&mut self, status: &RunStatus) {
        self.run = Some(*status);
    }
}
