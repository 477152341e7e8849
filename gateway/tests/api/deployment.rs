//! The deployment files against the code: every setting the binaries read is documented in the
//! README and set by the Kubernetes manifests (or documented as optional there), and the
//! manifests set nothing the binaries ignore. The README's "Used by" column says which component
//! reads which setting and which ones it requires; the manifests and the compose file give each
//! component what it requires and give no component a setting of its own that it does not read.
//! (That the column is enough to run each component is `startup`'s test.)

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

/// The README's configuration table rows, as cells.
fn table_rows() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap_or_default();
    let table = readme
        .split("## Configuration")
        .nth(1)
        .unwrap_or_default()
        .split("\n## ")
        .next()
        .unwrap_or_default()
        .to_owned();
    table
        .lines()
        .filter(|l| l.starts_with("| `"))
        // `\|` inside a cell is a literal bar.
        .map(|l| {
            l.replace("\\|", "/")
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The README's configuration table: each variable and whether its row calls it optional in
/// Kubernetes.
fn documented() -> Vec<(String, bool)> {
    table_rows()
        .iter()
        .filter_map(|cells| {
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let optional = cells.iter().any(|c| c.contains("optional in Kubernetes"));
            Some((name.to_owned(), optional))
        })
        .collect()
}

/// The components `latchkey serve` runs.
pub const SERVED: [&str; 5] = ["gateway", "auth", "teams", "contacts", "webhooks"];

/// Who reads a setting, from the README's "Used by" column.
#[derive(Debug, Default, Clone)]
pub struct UsedBy {
    /// Served components reading it, each with whether it refuses to start without it.
    pub components: Vec<(&'static str, bool)>,
    pub embedded: bool,
    pub cli: bool,
}

impl UsedBy {
    pub fn reads(&self, component: &str) -> bool {
        self.components.iter().any(|(c, _)| *c == component)
    }

    pub fn requires(&self, component: &str) -> bool {
        self.components.iter().any(|(c, r)| *c == component && *r)
    }
}

/// Every documented setting with its "Used by" cell read; an unknown word there fails.
pub fn used_by() -> Vec<(String, UsedBy)> {
    table_rows()
        .iter()
        .filter_map(|cells| {
            let name = cells.get(1)?.trim_matches('`').to_owned();
            let mut who = UsedBy::default();
            for word in cells.get(3)?.split(',').map(str::trim) {
                let required = word.ends_with("(required)");
                let word = word.trim_end_matches("(required)").trim();
                let expanded: &[&'static str] = match word {
                    "embedded" => {
                        who.embedded = true;
                        &[]
                    }
                    "CLI" => {
                        who.cli = true;
                        &[]
                    }
                    "all" => &SERVED,
                    "services" => &SERVED[1..],
                    other => match SERVED.iter().position(|c| *c == other) {
                        Some(i) => &SERVED[i..=i],
                        None => panic!("{name}: unknown word in the Used by column: {other:?}"),
                    },
                };
                who.components
                    .extend(expanded.iter().map(|c| (*c, required)));
            }
            Some((name, who))
        })
        .collect()
}

/// The names a Kubernetes Deployment gives its container: the shared ConfigMap (when the pod
/// takes it) and the pod's own `env` entries.
fn k8s_delivers(component: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let base = repo().join("k8s/base");
    let pod = std::fs::read_to_string(base.join(format!("{component}.yaml"))).unwrap_or_default();
    let own = names(&pod);
    let mut all = own.clone();
    if pod.contains("name: latchkey-config") {
        all.extend(names(
            &std::fs::read_to_string(base.join("config.yaml")).unwrap_or_default(),
        ));
    }
    (all, own)
}

/// The names the compose file gives a component's service: its merged anchors and its own.
fn compose_delivers(component: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let text = std::fs::read_to_string(repo().join("deploy/compose.yaml")).unwrap_or_default();
    let block = |start: &str| -> String {
        let Some(i) = text.find(start) else {
            return String::new();
        };
        let rest = &text[i + start.len()..];
        // A block ends at the next line indented no deeper than its own first line.
        let depth = start.len() - start.trim_start().len();
        rest.lines()
            .take_while(|l| {
                l.trim().is_empty() || l.len() - l.trim_start().len() > depth || l.starts_with('#')
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let service = block(&format!("\n  {component}:\n"));
    let own: BTreeSet<String> = service
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(names)
        .collect();
    let mut all = own.clone();
    if service.contains("*settings") {
        all.extend(names(&block("\nx-settings: &settings\n")));
    }
    if service.contains("*dev-secrets") {
        all.extend(names(&block("\nx-dev-secrets: &dev-secrets\n")));
    }
    (all, own)
}

#[test]
fn each_component_is_deployed_with_what_it_reads_and_requires() {
    let table = used_by();
    assert!(table.len() > 20, "{table:?}");
    for component in SERVED {
        let required: BTreeSet<String> = table
            .iter()
            .filter(|(_, u)| u.requires(component))
            .map(|(n, _)| n.clone())
            .collect();
        assert!(
            required.contains("LATCHKEY_INTERNAL_TOKEN"),
            "{component}: {required:?}"
        );
        for (file, (all, own)) in [
            ("k8s/base", k8s_delivers(component)),
            ("deploy/compose.yaml", compose_delivers(component)),
        ] {
            let missing: Vec<_> = required.difference(&all).collect();
            assert!(
                missing.is_empty(),
                "{file} does not give {component} what it requires: {missing:?}"
            );
            let unread: Vec<_> = own
                .iter()
                .filter(|n| !table.iter().any(|(t, u)| t == *n && u.reads(component)))
                .collect();
            assert!(
                unread.is_empty(),
                "{file} gives {component} settings it does not read: {unread:?}"
            );
        }
    }
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
