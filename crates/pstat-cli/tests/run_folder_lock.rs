//! `pstat run` into a folder another run holds is refused at once, with a one-line error naming
//! the holder, before any data or model is read.

use std::process::Command;

#[test]
fn a_run_into_a_locked_folder_exits_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    std::fs::create_dir(&out).unwrap();
    let held = pstat_study::RunLock::acquire(&out).unwrap();
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["run", "--quick", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(started.elapsed().as_secs() < 30, "refused at once");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let expected = format!(
        "error: {} is in use by pid {} since ",
        out.display(),
        std::process::id()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!out.join("config.toml").exists(), "nothing written");
    drop(held);
}
