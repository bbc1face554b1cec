//! Which scripts and functions declare `no-writes`, learned from the EVAL, SCRIPT LOAD and
//! FUNCTION LOAD requests that pass through the proxy, so that a WRITE pause
//! (`session/pause.rs`) lets EVALSHA and FCALL of read-only code through, as Redis does.
//!
//! Only what declares `no-writes` is kept (everything else may write, the safe default: it
//! waits out the pause), at most `MAX_ENTRIES` of each; code loaded on the nodes some other
//! way is unknown here and waits too. A function library is read as Redis registers it,
//! approximately: each `register_function` call's name and whether its `flags` list names
//! `no-writes`.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use resp::Request;
use ring::digest;

/// Most scripts, and most functions, remembered.
const MAX_ENTRIES: usize = 10_000;

#[derive(Debug, Default)]
pub(crate) struct CodeFlags {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// SHA1 (lowercase hex) of scripts whose shebang says `flags=no-writes`.
    scripts: HashSet<String>,
    /// Functions flagged `no-writes`, and each library's functions (for DELETE and REPLACE).
    functions: HashSet<String>,
    libraries: HashMap<String, Vec<String>>,
}

impl CodeFlags {
    /// Learn from a request the caller knows to be EVAL, SCRIPT … or FUNCTION … (`name` is
    /// its table name).
    pub(crate) fn learn(&self, name: &str, req: &Request) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match name {
            "eval" if req.argc() >= 2 => inner.script(req.arg(1)),
            "script|load" if req.argc() == 3 => inner.script(req.arg(2)),
            "script|flush" => inner.scripts.clear(),
            "function|load" if req.argc() >= 3 => inner.library(req.arg(req.argc() - 1)),
            "function|delete" if req.argc() == 3 => {
                let lib = String::from_utf8_lossy(req.arg(2)).into_owned();
                inner.forget(&lib);
            }
            "function|flush" => {
                inner.functions.clear();
                inner.libraries.clear();
            }
            _ => {}
        }
    }

    /// Whether the script `sha` (EVALSHA's argument) declared `no-writes`.
    pub(crate) fn script_reads_only(&self, sha: &[u8]) -> bool {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.scripts.contains(&sha)
    }

    /// Whether the function `name` (FCALL's argument) declared `no-writes`.
    pub(crate) fn function_reads_only(&self, name: &[u8]) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .functions
            .contains(String::from_utf8_lossy(name).as_ref())
    }
}

impl Inner {
    fn script(&mut self, body: &[u8]) {
        if !declares_no_writes(body) || self.scripts.len() >= MAX_ENTRIES {
            return;
        }
        let sha = digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, body);
        let hex: String = sha.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        self.scripts.insert(hex);
    }

    fn forget(&mut self, library: &str) {
        for f in self.libraries.remove(library).unwrap_or_default() {
            self.functions.remove(&f);
        }
    }

    /// A library's code: its name from the shebang, then each function registered.
    fn library(&mut self, code: &[u8]) {
        let text = String::from_utf8_lossy(code);
        let Some(name) = library_name(&text) else {
            return;
        };
        self.forget(&name);
        let mut names = Vec::new();
        for part in text.split("register_function").skip(1) {
            let Some(function) = function_name(part) else {
                continue;
            };
            if reads_only(part) && self.functions.len() < MAX_ENTRIES {
                self.functions.insert(function.clone());
            }
            names.push(function);
        }
        if self.libraries.len() < MAX_ENTRIES {
            self.libraries.insert(name, names);
        }
    }
}

/// A script whose shebang line says `flags=no-writes` (`#!lua flags=no-writes,…`): Redis
/// 7 runs it as read-only, so a WRITE pause lets it through.
pub(crate) fn declares_no_writes(script: &[u8]) -> bool {
    let Some(rest) = script.strip_prefix(b"#!") else {
        return false;
    };
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    line.split(|b| b.is_ascii_whitespace())
        .filter_map(|word| word.strip_prefix(b"flags="))
        .any(|flags| flags.split(|&b| b == b',').any(|f| f == b"no-writes"))
}

/// `#!lua name=<library>` on the first line.
fn library_name(code: &str) -> Option<String> {
    let first = code.strip_prefix("#!")?.lines().next()?;
    first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("name="))
        .map(String::from)
}

/// The function a `register_function` call names: `{function_name='f', …}` or `('f', …)`.
fn function_name(call: &str) -> Option<String> {
    let at = match call.find("function_name") {
        Some(at) if call.trim_start().starts_with('{') => at + "function_name".len(),
        _ => 0,
    };
    let rest = &call[at..];
    let open = rest.find(['\'', '"'])?;
    let quote = rest[open..].chars().next()?;
    let body = &rest[open + 1..];
    let close = body.find(quote)?;
    Some(body[..close].to_string())
}

/// Whether a `register_function{…}` call's `flags` list names `no-writes`.
fn reads_only(call: &str) -> bool {
    let Some(flags) = call.find("flags") else {
        return false;
    };
    let list = &call[flags..];
    let end = list.find('}').unwrap_or(list.len());
    list[..end].contains("no-writes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> Request {
        let mut buf = bytes::BytesMut::new();
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        resp::encode_command(&mut buf, &args);
        match resp::RequestParser::default().parse(&mut buf) {
            Ok(resp::Progress::Done(resp::Parsed::Request(r))) => r,
            _ => panic!("a request"),
        }
    }

    #[test]
    fn read_only_scripts_and_functions_are_known() {
        let flags = CodeFlags::default();
        let script = "#!lua flags=no-writes\nreturn 2";
        flags.learn("script|load", &req(&["SCRIPT", "LOAD", script]));
        flags.learn("eval", &req(&["EVAL", "return 1", "0"]));
        let sha = digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, script.as_bytes());
        let hex: String = sha.as_ref().iter().map(|b| format!("{b:02X}")).collect();
        assert!(
            flags.script_reads_only(hex.as_bytes()),
            "uppercase accepted"
        );
        assert_eq!(
            flags.inner.lock().unwrap().scripts.len(),
            1,
            "writers not kept"
        );
        let lib = "#!lua name=f1\nredis.register_function{\n function_name='f1',\n callback=function() return 'hello' end,\n flags={'no-writes'}\n}\nredis.register_function('f2', function() return 1 end)";
        flags.learn("function|load", &req(&["FUNCTION", "LOAD", "REPLACE", lib]));
        assert!(flags.function_reads_only(b"f1"));
        assert!(!flags.function_reads_only(b"f2"));
        let replaced = "#!lua name=f1\nredis.register_function('f1', function() return 1 end)";
        flags.learn(
            "function|load",
            &req(&["FUNCTION", "LOAD", "REPLACE", replaced]),
        );
        assert!(
            !flags.function_reads_only(b"f1"),
            "replaced without the flag"
        );
        flags.learn("function|load", &req(&["FUNCTION", "LOAD", lib]));
        flags.learn("function|delete", &req(&["FUNCTION", "DELETE", "f1"]));
        assert!(!flags.function_reads_only(b"f1"));
        flags.learn("script|flush", &req(&["SCRIPT", "FLUSH"]));
        assert!(!flags.script_reads_only(hex.as_bytes()));
    }
}
