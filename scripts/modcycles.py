#!/usr/bin/env python3
"""Import cycles between a crate's top-level modules.

Reads every .rs file under SRC (default crates/proxy/src), maps each file to its top-level
module (src/foo.rs and src/foo/** are `foo`; lib.rs is the crate root), collects the
`crate::X` paths each one names (in `use` items and in code), and prints the strongly
connected components with more than one module. Exit 1 if there is any cycle.

    python3 scripts/modcycles.py [SRC] [--graph]
"""
import os
import re
import sys


def top_module(src, path):
    rel = os.path.relpath(path, src)
    first = rel.split(os.sep)[0]
    if first in ("lib.rs", "main.rs"):
        return None
    return first[:-3] if first.endswith(".rs") else first


def edges(src):
    graph = {}
    use_block = re.compile(r"use\s+crate::\{([^;]*)\};", re.S)
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            me = top_module(src, path)
            if me is None:
                continue
            text = open(path, encoding="utf-8").read()
            # Test modules may reach anywhere; they are not part of the layering.
            text = re.split(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)[0]
            deps = graph.setdefault(me, set())
            for m in re.finditer(r"crate::([a-z_][a-z0-9_]*)", text):
                deps.add(m.group(1))
            for m in use_block.finditer(text):
                for item in re.findall(r"(?:^|[,{\s])([a-z_][a-z0-9_]*)::", m.group(1)):
                    deps.add(item)
            deps.discard(me)
    mods = set(graph)
    return {m: {d for d in ds if d in mods} for m, ds in graph.items()}


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    src = args[0] if args else "crates/proxy/src"
    graph = edges(src)
    if "--graph" in sys.argv:
        for m in sorted(graph):
            print(f"{m} -> {', '.join(sorted(graph[m])) or '-'}")
    cycles = sccs(graph)
    for c in cycles:
        print(f"cycle ({len(c)} modules): {' '.join(c)}")
    print(f"modcycles: {len(graph)} top-level modules, {len(cycles)} cycles")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
