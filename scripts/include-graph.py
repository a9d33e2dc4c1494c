#!/usr/bin/env python3
"""Folder dependency graph of runtime/ from its #include "folder/..." lines.

Prints one line per folder with the folders it includes, and fails (exit 1) when the
graph has a cycle, naming it, or when a folder includes one the house plan puts above it:
base <- vk <- device <- {import, transport, ops} <- appliance, the wings unaware of each
other except transport -> ops (the reduce kernel).

usage: scripts/include-graph.py [--root DIR]   (DIR: the source tree, default: this tree)
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[^"]+"', re.M)
# What each folder may include (besides itself); "include" is the public API.
ALLOWED = {
    "include": set(),
    "base": {"include"},
    "vk": {"include", "base"},
    "device": {"include", "base", "vk"},
    "ops": {"include", "base", "vk", "device"},
    "import": {"include", "base", "vk", "device"},
    "transport": {"include", "base", "vk", "device", "ops"},
    "appliance": {"include", "base", "vk", "device", "ops", "import", "transport"},
    # the lab (benches' knobs, counters, raw floors) sits above everything it measures
    "lab": {"include", "base", "vk", "device", "ops", "import", "transport", "appliance"},
}


def graph(runtime):
    folders = sorted(d for d in os.listdir(runtime) if os.path.isdir(os.path.join(runtime, d)))
    edges = {f: {} for f in folders}
    for f in folders:
        for dirpath, _, files in os.walk(os.path.join(runtime, f)):
            for name in files:
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                for m in INCLUDE.finditer(open(path, encoding="utf-8").read()):
                    to = m.group(1)
                    if to == "vkrt":  # runtime/include/vkrt/*.h
                        to = "include"
                    if to in edges and to != f:
                        edges[f].setdefault(to, os.path.relpath(path, os.path.dirname(runtime)))
    return edges


def find_cycle(edges):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, {})):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if not state.get(n):
            c = visit(n)
            if c:
                return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = ap.parse_args()
    edges = graph(os.path.join(a.root, "runtime"))
    bad = []
    for f in sorted(edges):
        print(f"{f} -> {', '.join(sorted(edges[f])) or '(nothing)'}")
        if f in ALLOWED:
            for to, where in sorted(edges[f].items()):
                if to not in ALLOWED[f]:
                    bad.append(f"{f} includes {to} ({where}), which the house plan puts above "
                               f"or beside it")
        else:
            bad.append(f"runtime/{f}/ is not in the house plan (scripts/include-graph.py ALLOWED)")
    cycle = find_cycle(edges)
    if cycle:
        bad.append("include cycle: " + " -> ".join(cycle) + " (" +
                   "; ".join(edges[x][y] for x, y in zip(cycle, cycle[1:])) + ")")
    for b in bad:
        print("include-graph: " + b, file=sys.stderr)
    if not bad:
        print("include-graph: no cycle; every folder includes only those below it")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
