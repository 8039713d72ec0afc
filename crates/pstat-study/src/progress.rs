//! How a run tells its caller what it is doing. The library only reports; the caller decides
//! how to show it: progress bars on a terminal (the CLI's), the plain [`Lines`] anywhere
//! else (nohup, Slurm, CI, a notebook), nothing in tests ([`Silent`]). Both faces keep
//! `run.log` in the out folder ([`RunLog`]): every line with its UTC time.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// Progress of a run. The unit-level methods come from [`pstat_prompt::Progress`] (a unit of
/// work with `n` items: start, advance, finish); a run adds stage headings and notes.
pub trait Progress: pstat_prompt::Progress {
    /// A stage begins, e.g. `smollm2-135m-instruct city_locations: representational`.
    fn stage(&mut self, name: &str);
    /// Something the user should read: a decision the run made, or a warning.
    fn note(&mut self, message: &str);
    /// The planned unit, or (with fields left out) the group of units, that the work which
    /// follows belongs to ([`crate::unit::UnitKey::covers`]).
    fn unit(&mut self, _key: &crate::unit::UnitKey) {}
    /// Where the whole run stands; sent whenever a unit starts or finishes.
    fn run_status(&mut self, _status: &RunStatus) {}
}

/// Reports nothing (tests, library use).
pub struct Silent;

impl pstat_prompt::Progress for Silent {
    fn start(&mut self, _: &str, _: usize) {}
    fn advance(&mut self, _: usize) {}
    fn finish(&mut self, _: bool) {}
}

impl Progress for Silent {
    fn stage(&mut self, _: &str) {}
    fn note(&mut self, _: &str) {}
}

/// Where a run stands, sent to the caller whenever a unit starts or finishes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunStatus {
    /// Units computed or found stored so far.
    pub done: usize,
    /// Units in the plan.
    pub total: usize,
    /// Estimated seconds of the pending units other than the one in flight, rescaled by the
    /// pace this run has measured so far; `None` when some of them have no estimate.
    pub remaining_s: Option<f64>,
}

/// `1h02m`, `12m03s` or `45s`: to the minute above an hour (an estimate is no finer).
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// How much a run says on stderr; `run.log` always gets every line.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Stage headings and notes only.
    Quiet,
    /// Plus a line per finished unit and a status line at most every 30 s.
    Normal,
    /// Status lines at most every 5 s.
    Verbose,
}

/// `<out>/run.log`, opened on the first line: the run creates and locks the folder before it
/// reports anything, so a refused run never writes into another run's log.
pub struct RunLog {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl RunLog {
    /// The log of the run folder `out` (`run.log`), opened on first use.
    pub fn new(out: &Path) -> Self {
        RunLog {
            path: out.join("run.log"),
            file: None,
        }
    }

    /// Appends `line` with its time, flushed at once so a killed run's log is complete.
    pub fn line(&mut self, line: &str) {
        if self.file.is_none() {
            self.file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(|e| eprintln!("warning: {}: {e}", self.path.display()))
                .ok();
        }
        if let Some(file) = &mut self.file {
            let stamped = format!("{} {line}\n", crate::lock::utc(SystemTime::now()));
            if let Err(e) = file.write_all(stamped.as_bytes()) {
                eprintln!("warning: {}: {e}", self.path.display());
                self.file = None;
            }
        }
    }
}

/// While it lives, the lines of network requests that wait long (a server that accepts and
/// does not answer: one line every 30 s, [`pstat_http::REPORT_EVERY`]) go to stderr and to
/// the run's `run.log`, whatever the progress display: they come from the client's own
/// threads, which hold no [`Progress`].
pub struct NetworkWaits;

impl NetworkWaits {
    /// Sends the HTTP client's waits into `out`'s `run.log` until dropped.
    pub fn report_into(out: &Path) -> Self {
        let log = std::sync::Mutex::new(RunLog::new(out));
        pstat_http::set_reporter(Some(std::sync::Arc::new(move |line: &str| {
            eprintln!("{line}");
            log.lock().unwrap_or_else(|e| e.into_inner()).line(line);
        })));
        NetworkWaits
    }
}

impl Drop for NetworkWaits {
    fn drop(&mut self) {
        pstat_http::set_reporter(None);
    }
}

/// The line of a finished unit: its items, time and rate, and where the run stands.
pub fn unit_line(
    unit: &str,
    n: usize,
    resumed: bool,
    took: Duration,
    run: Option<&RunStatus>,
) -> String {
    let line = if resumed {
        format!("done {unit}: {n} items (stored)")
    } else {
        format!(
            "done {unit}: {n} items in {}, {}",
            duration(took.as_secs_f64()),
            rate(n, took)
        )
    };
    match run {
        Some(run) => format!(
            "{line}; run {}/{} units, {} left",
            run.done,
            run.total,
            run.remaining_s.map_or("unknown".to_string(), duration)
        ),
        None => line,
    }
}

/// The status line of a unit in flight: items done of n, its rate, and when it will end at
/// that rate; then the run's units done of all, and when the run will end: this unit's ETA
/// plus the estimate of the units after it.
fn status_line(
    unit: &str,
    done: usize,
    n: usize,
    took: Duration,
    run: Option<&RunStatus>,
) -> String {
    let eta = (done > 0).then(|| took.mul_f64((n.saturating_sub(done)) as f64 / done as f64));
    let line = format!(
        "{unit}: {done}/{n} items, {}, unit ETA {}",
        rate(done, took),
        eta.map_or("unknown".to_string(), |eta| duration(eta.as_secs_f64()))
    );
    match run {
        Some(run) => format!(
            "{line}; run {}/{} units, run ETA {}",
            run.done,
            run.total,
            eta.zip(run.remaining_s)
                .map_or("unknown".to_string(), |(eta, rest)| duration(
                    eta.as_secs_f64() + rest
                ))
        ),
        None => line,
    }
}

fn rate(items: usize, took: Duration) -> String {
    let secs = took.as_secs_f64();
    if secs <= 0.0 || items == 0 {
        return "rate unknown".to_string();
    }
    let per_second = items as f64 / secs;
    if per_second >= 1.0 {
        format!("{per_second:.1} items/s")
    } else {
        format!("{:.1} s/item", secs / items.max(1) as f64)
    }
}

/// Plain lines for a stderr that is not a terminal: a line per stage, per note, per finished
/// unit, and a status line at most every 30 s (5 s verbose) while a unit runs.
pub struct Lines<W: Write, C: FnMut() -> Duration> {
    out: W,
    log: Option<RunLog>,
    /// Time since the run started (injected so tests control it).
    now: C,
    verbosity: Verbosity,
    unit: Option<(String, usize, usize, Duration)>,
    last_status: Duration,
    run: Option<RunStatus>,
}

impl Lines<std::io::Stderr, Box<dyn FnMut() -> Duration>> {
    /// Lines on stderr, copied into `out`'s `run.log`.
    pub fn stderr(out: &Path, verbosity: Verbosity) -> Self {
        let started = Instant::now();
        Lines::new(
            std::io::stderr(),
            Some(RunLog::new(out)),
            Box::new(move || started.elapsed()),
            verbosity,
        )
    }
}

impl<W: Write, C: FnMut() -> Duration> Lines<W, C> {
    /// Lines into `out` (and `log`), timed by `now`.
    pub fn new(out: W, log: Option<RunLog>, now: C, verbosity: Verbosity) -> Self {
        Lines {
            out,
            log,
            now,
            verbosity,
            unit: None,
            last_status: Duration::ZERO,
            run: None,
        }
    }

    fn emit(&mut self, line: &str, level: Verbosity) {
        let at = (self.now)();
        if self.verbosity >= level {
            let s = at.as_secs();
            // A failed write to stderr is not worth stopping a run for.
            let _ = writeln!(self.out, "[{:02}:{:02}] {line}", s / 60, s % 60);
        }
        if let Some(log) = &mut self.log {
            log.line(line);
        }
    }

    fn interval(&self) -> Duration {
        match self.verbosity {
            Verbosity::Verbose => Duration::from_secs(5),
            _ => Duration::from_secs(30),
        }
    }
}

impl<W: Write, C: FnMut() -> Duration> pstat_prompt::Progress for Lines<W, C> {
    fn start(&mut self, unit: &str, n: usize) {
        let now = (self.now)();
        self.unit = Some((unit.to_string(), n, 0, now));
        self.last_status = now;
    }
    fn advance(&mut self, k: usize) {
        let now = (self.now)();
        let interval = self.interval();
        let Some((unit, n, done, started)) = &mut self.unit else {
            return;
        };
        *done += k;
        if now.saturating_sub(self.last_status) >= interval {
            let line = status_line(unit, *done, *n, now - *started, self.run.as_ref());
            self.last_status = now;
            self.emit(&line, Verbosity::Normal);
        }
    }
    fn finish(&mut self, resumed: bool) {
        if let Some((unit, n, _, started)) = self.unit.take() {
            let took = (self.now)().saturating_sub(started);
            let line = unit_line(&unit, n, resumed, took, self.run.as_ref());
            self.emit(&line, Verbosity::Normal);
        }
    }
    fn warning(&mut self, message: &str) {
        self.emit(&format!("warning: {message}"), Verbosity::Quiet);
    }
}

impl<W: Write, C: FnMut() -> Duration> Progress for Lines<W, C> {
    fn stage(&mut self, name: &str) {
        self.emit(&format!("== {name}"), Verbosity::Quiet);
    }
    fn note(&mut self, message: &str) {
        self.emit(message, Verbosity::Quiet);
    }
    fn run_status(&mut self, status: &RunStatus) {
        self.run = Some(*status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_to_what_an_estimate_can_say() {
        assert_eq!(duration(44.6), "45s");
        assert_eq!(duration(723.0), "12m03s");
        assert_eq!(duration(3723.0), "1h02m");
        assert_eq!(duration(-5.0), "0s");
    }
    use pstat_prompt::Progress as _;
    use std::cell::Cell;
    use std::rc::Rc;

    fn run(verbosity: Verbosity, steps: &[(u64, usize)]) -> String {
        let t = Rc::new(Cell::new(0u64));
        let clock = t.clone();
        let mut out = Vec::new();
        {
            let mut lines = Lines::new(
                &mut out,
                None,
                move || Duration::from_secs(clock.get()),
                verbosity,
            );
            let run = |done, remaining_s| RunStatus {
                done,
                total: 2,
                remaining_s,
            };
            lines.stage("m city: representational");
            lines.run_status(&run(0, Some(600.0)));
            lines.start("m city Θ1", 100);
            for &(at, k) in steps {
                t.set(at);
                lines.advance(k);
            }
            t.set(100);
            lines.run_status(&run(1, Some(600.0)));
            lines.finish(false);
            lines.start("m city Θ2", 10);
            lines.run_status(&run(2, None));
            lines.finish(true);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn status_lines_come_at_most_every_30_s_with_the_unit_and_run_eta() {
        let text = run(Verbosity::Normal, &[(10, 10), (31, 10), (40, 10), (62, 10)]);
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "[00:00] == m city: representational",
                "[00:31] m city Θ1: 20/100 items, 1.6 s/item, unit ETA 2m04s; run 0/2 units, run ETA 12m04s",
                "[01:02] m city Θ1: 40/100 items, 1.6 s/item, unit ETA 1m33s; run 0/2 units, run ETA 11m33s",
                "[01:40] done m city Θ1: 100 items in 1m40s, 1.0 items/s; run 1/2 units, 10m00s left",
                "[01:40] done m city Θ2: 10 items (stored); run 2/2 units, unknown left",
            ]
        );
    }

    #[test]
    fn without_a_plan_the_lines_say_only_the_unit() {
        assert_eq!(
            status_line("u", 0, 10, Duration::from_secs(5), None),
            "u: 0/10 items, rate unknown, unit ETA unknown"
        );
        let run = RunStatus {
            done: 1,
            total: 3,
            remaining_s: Some(60.0),
        };
        assert_eq!(
            status_line("u", 0, 10, Duration::from_secs(5), Some(&run)),
            "u: 0/10 items, rate unknown, unit ETA unknown; run 1/3 units, run ETA unknown"
        );
    }

    #[test]
    fn quiet_keeps_stages_only() {
        let text = run(Verbosity::Quiet, &[(31, 10)]);
        assert_eq!(text, "[00:00] == m city: representational\n");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(30, Duration::from_secs(10)), "3.0 items/s");
        assert_eq!(rate(0, Duration::ZERO), "rate unknown");
    }

    #[test]
    fn run_log_appends_stamped_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RunLog::new(dir.path());
        log.line("first");
        RunLog::new(dir.path()).line("second");
        let text = std::fs::read_to_string(dir.path().join("run.log")).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].ends_with("Z first") && lines[1].ends_with("Z second"),
            "{text}"
        );
    }
}
