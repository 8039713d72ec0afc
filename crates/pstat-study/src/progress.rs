//! How a run tells its caller what it is doing. The library only reports; the caller decides
//! how to show it (progress bars on a terminal, plain lines in a log, nothing in tests).

/// Progress of a run. The unit-level methods come from [`pstat_prompt::Progress`] (a unit of
/// work with `n` items: start, advance, finish); a run adds stage headings and notes.
pub trait Progress: pstat_prompt::Progress {
    /// A stage begins, e.g. `smollm2-135m-instruct city_locations: representational`.
    fn stage(&mut self, name: &str);
    /// Something the user should read: a decision the run made, or a warning.
    fn note(&mut self, message: &str);
    /// The planned unit, or (with fields left out) the group of units, that the work which
    /// follows belongs to ([`crate::plan::UnitKey::covers`]).
    fn unit(&mut self, _key: &crate::plan::UnitKey) {}
    /// Where the whole run stands; sent whenever a unit starts or finishes.
    fn run_status(&mut self, _status: &crate::tracker::RunStatus) {}
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
