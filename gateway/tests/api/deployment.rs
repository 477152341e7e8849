//! The deployment files against the code: every setting the binaries read is documented in the
//! README and set by the Kubernetes manifests (or documented as optional there), and the
//! manifests set nothing the binaries ignore.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// Every `LATCHKEY_…` name (and `RUST_LOG`) in `text`.
fn names(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("LATCHKEY_") {
        let name: String = text[i..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        found.insert(name);
    }
    if text.contains("RUST_LOG") {
        found.insert("RUST_LOG".to_owned());
    }
    found
}

/// What the binaries read: clap's `env = "…"`, `std::env::var("…")` and the log filter.
fn read_by_binaries() -> BTreeSet<String> {
    let root = repo();
    let mut sources = Vec::new();
    for dir in ["gateway/src", "services", "shared/src"] {
        files(&root.join(dir), "rs", &mut sources);
    }
    let mut read = BTreeSet::new();
    for path in sources {
        // Test support reads its own `LATCHKEY_TEST_…` settings; a service's tests likewise.
        if path.ends_with("testing.rs") || path.components().any(|c| c.as_os_str() == "tests") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for marker in ["env = \"", "env::var(\""] {
            for (i, _) in text.match_indices(marker) {
                let rest = &text[i + marker.len()..];
                let name: String = rest.chars().take_while(|c| *c != '"').collect();
                read.insert(name);
            }
        }
        if text.contains("try_from_default_env") {
            read.insert("RUST_LOG".to_owned());
        }
    }
    read
}

/// The README's configuration table: each variable and whether its row calls it optional in
/// Kubernetes.
fn documented() -> Vec<(String, bool)> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap_or_default();
    let table = readme
        .split("## Configuration")
        .nth(1)
        .unwrap_or_default()
        .split("\n## ")
        .next()
        .unwrap_or_default();
    table
        .lines()
        .filter_map(|line| {
            let first = line.split('|').nth(1)?.trim();
            let name = first.strip_prefix('`')?.strip_suffix('`')?;
            Some((name.to_owned(), line.contains("optional in Kubernetes")))
        })
        .collect()
}

#[test]
fn every_setting_is_documented_and_deployed() {
    let read = read_by_binaries();
    assert!(
        read.contains("LATCHKEY_HTTP_ADDR") && read.len() > 20,
        "{read:?}"
    );

    let mut manifests = Vec::new();
    files(&repo().join("k8s/base"), "yaml", &mut manifests);
    let deployed: BTreeSet<String> = manifests
        .iter()
        .flat_map(|p| names(&std::fs::read_to_string(p).unwrap_or_default()))
        .collect();
    let docs = documented();
    let documented: BTreeSet<String> = docs.iter().map(|(n, _)| n.clone()).collect();
    let optional: BTreeSet<String> = docs
        .iter()
        .filter(|(_, o)| *o)
        .map(|(n, _)| n.clone())
        .collect();

    let undocumented: Vec<_> = read.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "read but not in the README's configuration table: {undocumented:?}"
    );
    let undeployed: Vec<_> = read
        .iter()
        .filter(|n| !deployed.contains(*n) && !optional.contains(*n))
        .collect();
    assert!(
        undeployed.is_empty(),
        "read but neither set in k8s/base nor documented as optional in Kubernetes: {undeployed:?}"
    );
    let stale: Vec<_> = deployed.difference(&read).collect();
    assert!(
        stale.is_empty(),
        "set in k8s/base but read by no binary: {stale:?}"
    );
    let stale_docs: Vec<_> = documented.difference(&read).collect();
    assert!(
        stale_docs.is_empty(),
        "documented but read by no binary: {stale_docs:?}"
    );
}
