//! What the commands print on stdout. `println!` panics when the reader has gone away
//! (`pstat models list | head`); these write through a `Result` instead and remember that the
//! reader closed the pipe, so `main` ends quietly with success ([`stdout_closed`]): the reader
//! simply wanted no more. Only stdout counts: a broken connection elsewhere stays an error.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Like `println!`, returning `std::io::Result<()>`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Like `print!`, returning `std::io::Result<()>`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!($($arg)*))
    };
}

pub(crate) use {out, outln};

/// Locked stdout that records a closed pipe; wrap it in a `BufWriter` for many small writes.
pub struct Stdout(std::io::StdoutLock<'static>);

pub fn stdout() -> Stdout {
    Stdout(std::io::stdout().lock())
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        noted(self.0.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        noted(self.0.flush())
    }
}

fn noted<T>(result: std::io::Result<T>) -> std::io::Result<T> {
    if let Err(e) = &result
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        CLOSED.store(true, Ordering::Relaxed);
    }
    result
}

/// Writes to stdout and flushes, so a closed pipe shows at once.
pub fn write(args: std::fmt::Arguments) -> std::io::Result<()> {
    let mut out = stdout();
    out.write_fmt(args)?;
    out.flush()
}

/// Whether a write to stdout found its reader gone.
pub fn stdout_closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}
