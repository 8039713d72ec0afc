//! One run per output folder: an advisory lock (`flock` on Unix, `LockFileEx` on Windows) on
//! `<out>/.lock`, held for the run's life. The kernel releases it when the holder exits for
//! any reason, kill -9 included, so a dead run's lock is taken over without cleanup; the file
//! itself stays and only says who held it last. Shards of one run hold it shared, so they run
//! together but never beside a whole run or a merge; what several shards may need at once
//! (a cell's veracity layer, an activation cache entry) is guarded by a [`WorkLock`].

use anyhow::{Context, bail};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The lock on a run folder; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct RunLock {
    // Held only for its lock: closing the file releases it.
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// The lock file of the run folder `out`.
    pub fn path_in(out: &Path) -> PathBuf {
        out.join(".lock")
    }

    /// Takes the lock of `out` (which must exist) at once, or fails with
    /// "`<out>` is in use by pid N since T" naming the holder.
    pub fn acquire(out: &Path) -> anyhow::Result<Self> {
        Self::take(out, false)
    }

    /// The lock a shard holds: shared with the other shards of the run, refused (like
    /// [`Self::acquire`]) while a whole run or a merge holds the folder.
    pub fn acquire_shared(out: &Path) -> anyhow::Result<Self> {
        Self::take(out, true)
    }

    fn take(out: &Path, shared: bool) -> anyhow::Result<Self> {
        let path = Self::path_in(out);
        let mut file = open_lock_file(&path)?;
        let taken = if shared {
            file.try_lock_shared()
        } else {
            file.try_lock()
        };
        match taken {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                // The holder wrote its line right after locking; an empty read means it is
                // between the two, which the message still reports as in use.
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "another process"
                } else {
                    holder
                };
                bail!("{} is in use by {holder}", out.display());
            }
            Err(TryLockError::Error(err)) => {
                return Err(err).with_context(|| format!("locking {}", path.display()));
            }
        }
        let holder = format!(
            "pid {} since {}\n",
            std::process::id(),
            utc(SystemTime::now())
        );
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(holder.as_bytes()))
            .and_then(|()| file.flush())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(RunLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A lock for work that concurrent shards may all need (and the first one computes): taking
/// it waits until the holder is done, then the waiter finds the result on disk.
#[derive(Debug)]
pub struct WorkLock {
    // Held only for its lock: closing the file releases it. `None` on a read-only filesystem.
    _file: Option<File>,
}

impl WorkLock {
    /// Waits for the lock file `path` (created with its folder where missing). Where the
    /// folder cannot be written (a read-only `PSTAT_HOME` whose cache holds everything), no
    /// process can be writing there either, so there is nothing to wait for: the lock is
    /// taken on the existing file read-only, or not at all, and a later write into the folder
    /// fails naming its file.
    pub fn wait(path: &Path) -> anyhow::Result<Self> {
        let read_only = |e: &std::io::Error| {
            matches!(
                e.kind(),
                std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied
            )
        };
        if let Some(dir) = path.parent()
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            if read_only(&e) {
                return Ok(WorkLock { _file: None });
            }
            return Err(e).with_context(|| format!("creating {}", dir.display()));
        }
        let file = match open_lock_file(path) {
            Ok(file) => file,
            Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(read_only) => {
                match std::fs::symlink_metadata(path) {
                    Ok(meta) if meta.is_file() => {
                        File::open(path).with_context(|| format!("opening {}", path.display()))?
                    }
                    _ => return Ok(WorkLock { _file: None }),
                }
            }
            Err(e) => return Err(e),
        };
        file.lock()
            .with_context(|| format!("locking {}", path.display()))?;
        Ok(WorkLock { _file: Some(file) })
    }
}

/// Opens (read and write) or creates the lock file `path` without following a link: a lock
/// that is a symbolic link would have the holder's line written into whatever it points at.
/// A new file is created exclusively (`O_EXCL`, which never follows a link); an existing one is
/// opened and then must be the very file at `path` (same device and inode as `lstat` sees,
/// and no link), checked before a byte is written.
fn open_lock_file(path: &Path) -> anyhow::Result<File> {
    let refuse = || {
        anyhow::anyhow!(
            "{} is a symbolic link, not a lock file: a run never writes through a link; remove it",
            path.display()
        )
    };
    let open_existing = || OpenOptions::new().read(true).write(true).open(path);
    let file = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => return Err(refuse()),
        Ok(_) => open_existing(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
            {
                // Another process created it between the two calls.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => open_existing(),
                other => other,
            }
        }
        Err(e) => Err(e),
    }
    .with_context(|| format!("opening {}", path.display()))?;
    let here =
        std::fs::symlink_metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if here.file_type().is_symlink() || !same_file(&here, &file)? {
        return Err(refuse());
    }
    Ok(file)
}

#[cfg(unix)]
fn same_file(at_path: &std::fs::Metadata, file: &File) -> anyhow::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let opened = file.metadata()?;
    Ok(opened.dev() == at_path.dev() && opened.ino() == at_path.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &File) -> anyhow::Result<bool> {
    // Without inode numbers the link check before opening is what holds.
    Ok(true)
}

/// `time` as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds).
pub fn utc(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_second_lock_on_the_folder_is_refused_with_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        // Another open file description, as another process would have.
        let err = RunLock::acquire(dir.path()).unwrap_err().to_string();
        let expected = format!(
            "{} is in use by pid {} since ",
            dir.path().display(),
            std::process::id()
        );
        assert!(err.starts_with(&expected), "{err}");
        assert!(err.ends_with('Z') && !err.contains('\n'), "{err}");
        drop(first);
        RunLock::acquire(dir.path()).expect("released on drop");
    }

    #[test]
    fn shards_share_the_folder_but_not_with_a_whole_run() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire_shared(dir.path()).unwrap();
        let second = RunLock::acquire_shared(dir.path()).expect("shards run together");
        let err = RunLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is in use by pid"), "{err}");
        drop((first, second));
        let whole = RunLock::acquire(dir.path()).unwrap();
        assert!(RunLock::acquire_shared(dir.path()).is_err());
        drop(whole);
    }

    #[test]
    fn the_lock_of_a_dead_process_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let lock = RunLock::path_in(dir.path());
        // A process that takes the lock as a run does, then dies without cleaning up.
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(r#"exec 9>>"$1"; flock -n 9 && echo "pid $$ since 2026-01-01T00:00:00Z" >"$1" && kill -9 $$"#)
            .arg("sh")
            .arg(&lock)
            .status()
            .unwrap();
        assert!(!status.success(), "the holder was killed");
        assert!(std::fs::read_to_string(&lock).unwrap().starts_with("pid "));
        let taken = RunLock::acquire(dir.path()).expect("a dead holder's lock is free");
        let holder = std::fs::read_to_string(taken.path()).unwrap();
        assert!(
            holder.starts_with(&format!("pid {} since ", std::process::id())),
            "{holder}"
        );
    }

    #[test]
    fn a_lock_that_is_a_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious.txt");
        std::fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, RunLock::path_in(dir.path())).unwrap();
        let err = RunLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        // A dangling link is refused too (O_EXCL does not create through it).
        std::fs::remove_file(&target).unwrap();
        assert!(RunLock::acquire(dir.path()).is_err());
        assert!(!target.exists(), "nothing created through the link");
        let work = dir.path().join("work.lock");
        std::fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, &work).unwrap();
        assert!(WorkLock::wait(&work).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    }

    #[test]
    fn utc_formats_calendar_dates() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096); // a leap day
        assert_eq!(utc(t), "2024-02-29T12:34:56Z");
    }
}
