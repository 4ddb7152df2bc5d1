#!/usr/bin/env python3
"""The harness's include graph by layer: per-folder edges, back-edges (an include of a higher layer's header) and
include cycles, between files and between modules (a header with its .cpp of the same name).

Usage: scripts/include-graph.py SRC_DIR [--assign-from DIR] [--check]

Only quoted includes that resolve inside SRC_DIR count (beside the including file, else from SRC_DIR). A file's
layer is its folder under SRC_DIR; --assign-from DIR takes it instead from where a file of the same name sits under
DIR, so a tree of another layout (a flat one) is measured with the same cut. --check: exit 1 on any back-edge, file
cycle or folder cycle (a module cycle inside a folder breaks no layer: reported only). Exit codes: 0 done (with
--check: clean), 1 a break of the layering under --check, 2 bad usage.
"""
import os
import re
import sys

# Lowest first: a file includes headers of its own layer and those below (docs/layout.md, "The harness's folders").
LAYERS = ["core", "device", "cases", "plugins", "results", "compare", "run", "cli"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root):
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith((".hpp", ".cpp", ".h"))]
    return sorted(out)


def includes(root, files):
    known = set(files)
    graph = {}
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8").read()
        deps = []
        for name in INCLUDE.findall(text):
            beside = os.path.normpath(os.path.join(os.path.dirname(f), name))
            for cand in (beside, os.path.normpath(name)):
                if cand in known:
                    deps.append(cand)
                    break
        graph[f] = sorted(set(deps))
    return graph


def folder_of(f, assign):
    if assign is not None:
        return assign.get(os.path.basename(f), "?")
    return os.path.dirname(f) or "."


def sccs(graph):
    """Tarjan's strongly connected components of size > 1, each sorted, iteratively (no recursion limit)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, []))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def main(argv):
    args, assign_dir, check = [], None, False
    it = iter(argv)
    for a in it:
        if a == "--assign-from":
            assign_dir = next(it, None)
        elif a == "--check":
            check = True
        else:
            args.append(a)
    if len(args) != 1 or not os.path.isdir(args[0]) or (assign_dir is not None and not os.path.isdir(assign_dir)):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = args[0]
    files = sources(root)
    graph = includes(root, files)
    assign = None
    if assign_dir is not None:
        assign = {os.path.basename(f): os.path.dirname(f) or "." for f in sources(assign_dir)}
    rank = {name: i for i, name in enumerate(LAYERS)}
    layer = {f: folder_of(f, assign) for f in files}

    pairs, back = {}, []
    for f, deps in graph.items():
        for d in deps:
            a, b = layer[f], layer[d]
            pairs[(a, b)] = pairs.get((a, b), 0) + 1
            if rank.get(b, len(LAYERS)) > rank.get(a, len(LAYERS)):
                back.append((f, d))
    print(f"{len(files)} files, {sum(len(d) for d in graph.values())} src-local includes")
    print("edges by folder (from -> to: count):")
    for (a, b), c in sorted(pairs.items(), key=lambda p: (rank.get(p[0][0], 99), rank.get(p[0][1], 99))):
        print(f"  {a} -> {b}: {c}" + ("   BACK" if rank.get(b, len(LAYERS)) > rank.get(a, len(LAYERS)) else ""))
    unplaced = sorted({l for l in layer.values() if l not in rank})
    if unplaced:
        print("folders outside the layers (counted above every layer): " + ", ".join(unplaced))

    print(f"back-edges: {len(back)}")
    for f, d in sorted(back):
        print(f"  {f} [{layer[f]}] -> {d} [{layer[d]}]")

    file_cycles = sccs(graph)
    print(f"file cycles: {len(file_cycles)}")
    for c in file_cycles:
        print("  " + " ".join(c))

    modules = {}
    for f, deps in graph.items():
        m = os.path.splitext(f)[0]
        modules.setdefault(m, set()).update(os.path.splitext(d)[0] for d in deps)
    for m in modules:
        modules[m].discard(m)
    module_graph = {m: sorted(d) for m, d in modules.items()}
    module_cycles = sccs(module_graph)
    print(f"module cycles (x.hpp with x.cpp): {len(module_cycles)}")
    for c in module_cycles:
        print("  " + " ".join(c))

    folders = {}
    for (a, b) in pairs:
        folders.setdefault(a, set())
        if a != b:
            folders[a].add(b)
    folder_cycles = sccs({a: sorted(b) for a, b in folders.items()})
    print(f"folder cycles: {len(folder_cycles)}")
    for c in folder_cycles:
        print("  " + " ".join(c))

    dirty = back or file_cycles or folder_cycles
    return 1 if check and dirty else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
