//! Which files each file names: every `use` and every path in code (`crate::a::B`,
//! `super::C`, `self::d::e`, `child::f`), resolved to the file that holds the module the path
//! goes through. Paths inside macro calls are not seen (their tokens are not parsed), nor
//! names brought in by a glob and used bare; both are rare here and the `use` that brought
//! them in already counts.

use syn::visit::Visit;

use crate::modtree::ModTree;

/// For each file, the other files it names, each with the first path that did.
pub fn file_edges(tree: &ModTree) -> Vec<Vec<(usize, String)>> {
    let mut edges = Vec::with_capacity(tree.files.len());
    for (index, file) in tree.files.iter().enumerate() {
        let mut v = Collector {
            tree,
            me: index,
            module: file.module.clone(),
            out: Vec::new(),
        };
        v.visit_file(&file.ast);
        edges.push(v.out);
    }
    edges
}

struct Collector<'a> {
    tree: &'a ModTree,
    me: usize,
    /// The module the visitor is in (an inline `mod` inside the file extends it).
    module: Vec<String>,
    out: Vec<(usize, String)>,
}

impl Collector<'_> {
    fn named(&mut self, segments: &[String]) {
        let Some(full) = resolve(self.tree, &self.module, segments) else {
            return;
        };
        let Some(full) = self.tree.canonical(full) else {
            return;
        };
        let Some(file) = self.tree.file_of(&full) else {
            return;
        };
        if file != self.me && !self.out.iter().any(|(f, _)| *f == file) {
            self.out.push((file, segments.join("::")));
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let test_only = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.parse_args::<syn::Meta>()
                    .map(|meta| meta.path().is_ident("test"))
                    .unwrap_or(false)
        });
        if test_only || m.content.is_none() {
            return;
        }
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    /// `pub(crate)` and `pub(super)` name no module to depend on.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        flatten(&u.tree, &mut Vec::new(), &mut leaves);
        for leaf in leaves {
            self.named(&leaf);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.named(&segments);
        syn::visit::visit_path(self, p);
    }
}

/// Every path a `use` tree names (`a::{b, c::d}` gives `a::b` and `a::c::d`).
pub fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => out.push(prefix.clone()),
        syn::UseTree::Name(n) => out.push(extend(prefix, &n.ident)),
        syn::UseTree::Rename(r) => out.push(extend(prefix, &r.ident)),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix, out);
            }
        }
    }
}

fn extend(prefix: &[String], ident: &syn::Ident) -> Vec<String> {
    let mut v = prefix.to_vec();
    v.push(ident.to_string());
    v
}

/// A path as written in `module`, made absolute from the crate root; None when it leads
/// out of the crate (std, another crate, a local name).
pub fn resolve(tree: &ModTree, module: &[String], segments: &[String]) -> Option<Vec<String>> {
    let first = segments.first()?;
    match first.as_str() {
        "crate" => Some(segments[1..].to_vec()),
        "self" => Some([module, &segments[1..]].concat()),
        "super" => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            let base = module.len().checked_sub(ups)?;
            Some([&module[..base], &segments[ups..]].concat())
        }
        _ => {
            let child = [module, &segments[..1]].concat();
            tree.modules
                .contains_key(&child)
                .then(|| [module, segments].concat())
        }
    }
}
