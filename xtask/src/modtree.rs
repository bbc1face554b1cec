//! A crate's module tree as the compiler finds it: from `lib.rs` (or `main.rs`), every
//! `mod name;` to its file, each file parsed once. Test-only modules (`#[cfg(test)]`) are
//! left out: tests may reach anywhere, they are not part of the layering.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One source file of the crate.
pub struct SourceFile {
    /// Relative to the crate's `src`, with `/`.
    pub rel: String,
    /// Its module path from the crate root (`session::order` for `session/order.rs`).
    pub module: Vec<String>,
    pub ast: syn::File,
}

pub struct ModTree {
    pub files: Vec<SourceFile>,
    /// Every module path, inline modules included, to the file that holds it.
    pub modules: HashMap<Vec<String>, usize>,
    /// What each module re-exports (`pub use`, `pub(crate) use`): name to full path, so a
    /// path through a re-export leads to the file that defines the item.
    /// None: the item comes from outside the crate.
    reexports: HashMap<Vec<String>, HashMap<String, Option<Vec<String>>>>,
}

impl ModTree {
    pub fn load(src: &Path) -> Result<ModTree, String> {
        let root = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .find(|p| p.exists())
            .ok_or("no lib.rs or main.rs")?;
        let mut tree = ModTree {
            files: Vec::new(),
            modules: HashMap::new(),
            reexports: HashMap::new(),
        };
        // (file, its module path, the folder its child modules live in); a worklist, so a
        // deep tree costs no stack.
        let mut todo = vec![(root, Vec::new(), src.to_path_buf())];
        while let Some((path, module, child_dir)) = todo.pop() {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let ast = syn::parse_file(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            let index = tree.files.len();
            tree.modules.insert(module.clone(), index);
            let mut inline = vec![(ast.items.as_slice(), module.clone(), child_dir)];
            while let Some((items, module, dir)) = inline.pop() {
                for item in items {
                    let syn::Item::Mod(m) = item else { continue };
                    if test_only(&m.attrs) {
                        continue;
                    }
                    let name = m.ident.to_string();
                    let mut child = module.clone();
                    child.push(name.clone());
                    match &m.content {
                        Some((_, items)) => {
                            tree.modules.insert(child.clone(), index);
                            inline.push((items.as_slice(), child, dir.join(&name)));
                        }
                        None => {
                            let flat = dir.join(format!("{name}.rs"));
                            let (file, grandchildren) = if flat.exists() {
                                (flat, dir.join(&name))
                            } else {
                                (dir.join(&name).join("mod.rs"), dir.join(&name))
                            };
                            todo.push((file, child, grandchildren));
                        }
                    }
                }
            }
            let rel = path
                .strip_prefix(src)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            tree.files.push(SourceFile { rel, module, ast });
        }
        tree.collect_reexports();
        Ok(tree)
    }

    fn collect_reexports(&mut self) {
        let mut found: Vec<(Vec<String>, String, Option<Vec<String>>)> = Vec::new();
        for file in &self.files {
            let mut scopes = vec![(file.ast.items.as_slice(), file.module.clone())];
            while let Some((items, module)) = scopes.pop() {
                for item in items {
                    match item {
                        syn::Item::Use(u) if !matches!(u.vis, syn::Visibility::Inherited) => {
                            let mut leaves = Vec::new();
                            crate::refs::flatten(&u.tree, &mut Vec::new(), &mut leaves);
                            for leaf in leaves {
                                let Some(name) = leaf.last().cloned() else {
                                    continue;
                                };
                                let full = crate::refs::resolve(self, &module, &leaf);
                                found.push((module.clone(), name, full));
                            }
                        }
                        syn::Item::Mod(m) if !test_only(&m.attrs) => {
                            if let Some((_, items)) = &m.content {
                                let mut child = module.clone();
                                child.push(m.ident.to_string());
                                scopes.push((items.as_slice(), child));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        for (module, name, full) in found {
            self.reexports.entry(module).or_default().insert(name, full);
        }
    }

    /// `path` with every re-export on its way replaced by what it names; None when that
    /// leads out of the crate.
    pub fn canonical(&self, mut path: Vec<String>) -> Option<Vec<String>> {
        // A re-export of a re-export is followed too; a cycle of them stops here.
        for _ in 0..8 {
            let n = (0..=path.len())
                .rev()
                .find(|n| self.modules.contains_key(&path[..*n]))
                .unwrap_or(0);
            let target = path
                .get(n)
                .and_then(|name| self.reexports.get(&path[..n])?.get(name));
            match target {
                Some(None) => return None,
                Some(Some(target)) if *target != path[..=n] => {
                    path = [target.as_slice(), &path[n + 1..]].concat();
                }
                _ => break,
            }
        }
        Some(path)
    }

    /// The file holding the longest module prefix of `path` (an item's full path).
    pub fn file_of(&self, path: &[String]) -> Option<usize> {
        (0..=path.len())
            .rev()
            .find_map(|n| self.modules.get(&path[..n]).copied())
    }

    /// The folder a file's module sits in: `session/send` for `session/send/release.rs`,
    /// `session` for `session/send/mod.rs`'s siblings such as `session/order.rs` and for `session/mod.rs`'s children alike.
    pub fn folder(&self, file: usize) -> PathBuf {
        let rel = Path::new(&self.files[file].rel);
        rel.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .map(|m| m.path().is_ident("test"))
                .unwrap_or(false)
    })
}
