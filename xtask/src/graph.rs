//! Cycles in the import graph: strongly connected sets of more than one file, and of more
//! than one module of a folder (a module's files and sub-folders taken together).

use std::collections::{BTreeMap, BTreeSet};

use crate::modtree::ModTree;

/// The strongly connected sets of files with more than one member.
pub fn cycles(edges: &[Vec<(usize, String)>]) -> Vec<Vec<usize>> {
    let adjacency: Vec<Vec<usize>> = edges
        .iter()
        .map(|out| out.iter().map(|(to, _)| *to).collect())
        .collect();
    strongly_connected(&adjacency)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect()
}

/// For each folder, the cycles between its entries: `order.rs` and `order/` are one entry
/// (the module `order` and everything under it), `mod.rs` (or `lib.rs`) is the folder's own.
pub fn folder_cycles(tree: &ModTree, edges: &[Vec<(usize, String)>]) -> Vec<(String, Vec<String>)> {
    let mut folders: BTreeSet<String> = BTreeSet::new();
    for f in 0..tree.files.len() {
        let mut dir = tree.folder(f);
        loop {
            folders.insert(dir.to_string_lossy().into_owned());
            if !dir.pop() {
                break;
            }
        }
    }
    let mut out = Vec::new();
    for folder in folders {
        let entry_of = |file: usize| entry(&tree.files[file].rel, &folder);
        let mut names: BTreeMap<String, usize> = BTreeMap::new();
        for f in 0..tree.files.len() {
            if let Some(e) = entry_of(f) {
                let n = names.len();
                names.entry(e).or_insert(n);
            }
        }
        let mut adjacency = vec![BTreeSet::new(); names.len()];
        for (from, out) in edges.iter().enumerate() {
            let Some(a) = entry_of(from) else { continue };
            for (to, _) in out {
                let Some(b) = entry_of(*to) else { continue };
                if a != b {
                    adjacency[names[&a]].insert(names[&b]);
                }
            }
        }
        let adjacency: Vec<Vec<usize>> = adjacency
            .into_iter()
            .map(|s| s.into_iter().collect())
            .collect();
        let by_index: BTreeMap<usize, &String> = names.iter().map(|(n, i)| (*i, n)).collect();
        for cycle in strongly_connected(&adjacency)
            .into_iter()
            .filter(|c| c.len() > 1)
        {
            let mut members: Vec<String> = cycle.iter().map(|i| by_index[i].clone()).collect();
            members.sort();
            out.push((folder.clone(), members));
        }
    }
    out
}

/// The entry of `folder` that `rel` sits in (`send` for `session/send/release.rs` in
/// `session`), or None when it is not under `folder`.
fn entry(rel: &str, folder: &str) -> Option<String> {
    let rest = if folder.is_empty() {
        rel
    } else {
        rel.strip_prefix(folder)?.strip_prefix('/')?
    };
    let first = rest.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first).to_string())
}

/// Tarjan's algorithm with an explicit stack (no recursion on the graph's depth).
fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adjacency.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let (mut on_stack, mut stack, mut out) = (vec![false; n], Vec::new(), Vec::new());
    let mut next = 0;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        // (node, how many of its edges are done)
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut done)) = work.last_mut() {
            if *done == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = adjacency[v].get(*done) {
                *done += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                component.sort();
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_cycle_and_leaves_a_chain() {
        // 0 -> 1 -> 2 -> 0 is a cycle; 3 -> 0 and 4 alone are not.
        let adjacency = vec![vec![1], vec![2], vec![0], vec![0], vec![]];
        let mut sets: Vec<Vec<usize>> = strongly_connected(&adjacency)
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect();
        sets.sort();
        assert_eq!(sets, vec![vec![0, 1, 2]]);
    }

    #[test]
    fn entries_of_a_folder() {
        assert_eq!(
            entry("session/order/release.rs", "session").as_deref(),
            Some("order")
        );
        assert_eq!(
            entry("session/order.rs", "session").as_deref(),
            Some("order")
        );
        assert_eq!(entry("session.rs", "").as_deref(), Some("session"));
        assert_eq!(entry("route/mod.rs", "session"), None);
    }
}
