//! Stamps the binary with the git commit it was built from and whether the sources differed
//! from it (`pstat --version`, every manifest). Outside a git checkout both read `unknown`.

use std::path::Path;
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&crate_dir).join("../..");
    let commit = git(&root, &["rev-parse", "HEAD"]);
    // Untracked files count: a new source file not yet committed changes the build too.
    let dirty = commit
        .as_ref()
        // --no-optional-locks: a plain `git status` rewrites the index, which is watched below,
        // so every build would rerun this script and recompile the binary.
        .and_then(|_| git(&root, &["--no-optional-locks", "status", "--porcelain"]))
        .map(|status| !status.is_empty());
    println!(
        "cargo:rustc-env=PSTAT_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!(
        "cargo:rustc-env=PSTAT_GIT_DIRTY={}",
        dirty.map_or("unknown", |d| if d { "true" } else { "false" })
    );
    // Rerun when the commit moves (HEAD, its branch ref, the index) or any source the build
    // reads changes (the dirty flag); these are also what rebuilds the binary anyway.
    if let Some(git_dir) = git(&root, &["rev-parse", "--absolute-git-dir"]) {
        let git_dir = Path::new(&git_dir);
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        println!("cargo:rerun-if-changed={}", git_dir.join("index").display());
        if let Some(head_ref) = git(&root, &["symbolic-ref", "-q", "HEAD"])
            && let Some(common) = git(&root, &["rev-parse", "--git-common-dir"])
        {
            let common = root.join(common);
            println!(
                "cargo:rerun-if-changed={}",
                common.join(&head_ref).display()
            );
            println!(
                "cargo:rerun-if-changed={}",
                common.join("packed-refs").display()
            );
        }
    }
    for source in ["crates", "data", "configs", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(source).display());
    }
}
