//! Where the external client tools live. Each can be pointed at explicitly
//! with an environment variable; otherwise the paths `scripts/test`
//! installs to are used.

use std::path::{Path, PathBuf};

use crate::workspace_root;

/// Find an executable named `name` on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `kcat`: env `KCAT`, else `kcat` (or the older name `kafkacat`) on `PATH`.
pub fn kcat() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KCAT") {
        let p = PathBuf::from(p);
        return is_executable(&p).then_some(p);
    }
    find_on_path("kcat").or_else(|| find_on_path("kafkacat"))
}

/// The Python interpreter with kafka-python installed: env
/// `WEIR_COMPAT_PYTHON`, else `<workspace>/.test-deps/venv/bin/python`.
pub fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WEIR_COMPAT_PYTHON") {
        let p = PathBuf::from(p);
        return is_executable(&p).then_some(p);
    }
    let p = workspace_root().join(".test-deps/venv/bin/python");
    is_executable(&p).then_some(p)
}

/// Directory of the Python checks (`tests/compat/python`).
pub fn python_dir() -> PathBuf {
    workspace_root().join("tests/compat/python")
}

/// `node`: env `NODE`, else `node` on `PATH`.
pub fn node() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NODE") {
        let p = PathBuf::from(p);
        return is_executable(&p).then_some(p);
    }
    find_on_path("node")
}

/// Directory of the kafkajs checks (`tests/compat/js`, env `WEIR_COMPAT_JS_DIR`).
pub fn js_dir() -> PathBuf {
    std::env::var_os("WEIR_COMPAT_JS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/compat/js"))
}

/// True when `npm ci` has installed kafkajs into [`js_dir`].
pub fn kafkajs_installed() -> bool {
    js_dir().join("node_modules/kafkajs/package.json").is_file()
}
