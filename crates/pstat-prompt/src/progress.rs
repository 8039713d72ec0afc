//! How a study reports the progress of its units.

/// Progress of the units of a study (the CLI draws bars; tests ignore it).
pub trait Progress {
    /// A unit named `unit` starts; it judges `n` statements.
    fn start(&mut self, unit: &str, n: usize);
    /// `n` more statements of the current unit are done (resumed ones included).
    fn advance(&mut self, n: usize);
    /// The current unit is done; `resumed`: its stored judgments were reused, none computed.
    fn finish(&mut self, resumed: bool);
    /// Something went wrong and was recovered from (a damaged unit recomputed); the user
    /// should read it. Printed on stderr unless the caller shows it its own way.
    fn warning(&mut self, message: &str) {
        eprintln!("warning: {message}");
    }
}

/// A [`Progress`] that reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn start(&mut self, _: &str, _: usize) {}
    fn advance(&mut self, _: usize) {}
    fn finish(&mut self, _: bool) {}
}
