//! Reads the report as a person would: headless Chromium renders report.html offline, the
//! test fails on console errors or figures that did not render, and keeps a full-page
//! screenshot beside the report for a human to look at. Without Chromium the test records a
//! skip, except under CI=true, where it must run.

mod fixture;

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {name}"))
                .output()
                .ok()?;
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
        })
}

/// Run Chromium headless on `page` with no network, sync or first-run work.
fn headless(browser: &Path, profile: &Path, page: &Path, extra: &[&str]) -> (String, String) {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn report_renders_in_headless_chromium_without_errors() {
    let Some(browser) = chromium().or_else(|| {
        pstat_testkit::missing("chromium not found (install Debian's `chromium` to run it)")
    }) else {
        return;
    };
    // Kept under the target dir (not a tempdir) so the screenshot can be looked at afterwards.
    let run = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser-run");
    let _ = std::fs::remove_dir_all(&run);
    fixture::write_run(&run);
    let report = pstat_report::build_report(&run).unwrap();
    let page = report.html.canonicalize().unwrap();
    let profile = tempfile::tempdir().unwrap();

    let (dom, log) = headless(&browser, profile.path(), &page, &["--dump-dom"]);
    for bad in [
        "Uncaught",
        "Failed to load",
        "ERR_FILE_NOT_FOUND",
        "Refused to",
    ] {
        assert!(!log.contains(bad), "browser log has `{bad}`:\n{log}");
    }
    // Every figure rendered as an inline SVG with its drawing; no <img> to break.
    let html = std::fs::read_to_string(&page).unwrap();
    let expected = html.matches("<svg").count();
    assert_eq!(expected, 10);
    assert_eq!(
        dom.matches("<svg").count(),
        expected,
        "the browser's DOM lost figures"
    );
    assert_eq!(dom.matches("<img").count(), 0);
    assert!(dom.contains("What this run shows") && dom.contains("Fig. 3"));

    let shot = run.join("report-screenshot.png");
    let (_, log) = headless(
        &browser,
        profile.path(),
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,4000",
            "--hide-scrollbars",
        ],
    );
    assert!(!log.contains("Uncaught"), "{log}");
    let png = std::fs::read(&shot)
        .unwrap_or_else(|e| panic!("no screenshot at {}: {e}\n{log}", shot.display()));
    assert_eq!(&png[1..4], b"PNG");
    eprintln!("screenshot: {}", shot.display());
}
