#!/usr/bin/env python3
"""The include graph of a folder's units: include cycles, kernels that include Tensor or tape.

    scripts/include_graph.py [FOLDER] [--check] [--dot FILE] [--per-unit] [-I DIR]... [--root DIR]

Reads the `#include "..."` lines of the sources (no build needed, nothing is compiled) and groups
the files of FOLDER (default autograd/, subfolders included, so autograd/kernels/ too) into units:
a .h and the .cpp of the same stem in the same folder are one unit (autograd/tape.h and
autograd/tape.cpp are the unit autograd/tape; autograd/kernels/gemm.h and .cpp are
autograd/kernels/gemm); a file without a partner is a unit of its own. Unit A depends on unit B
when a file of A includes a file of B. It prints
  - the units, with their files;
  - the include cycles: every strongly connected component of the unit graph with more than one
    unit, and for each a shortest cycle through it with the file and line of each include that
    closes it (--per-unit: a shortest cycle through each member unit, i.e. why it is in the cycle);
  - every include in autograd/kernels/ of autograd/tensor.h or autograd/tape.h, directly or of a
    header that includes one of them (then with the chain of includes that reaches it).
--check exits 1 if there is a cycle or such a kernel include (0 otherwise); without it the exit
status is 0 (2 on a usage error). --dot FILE also writes the unit graph for Graphviz (`dot -Tsvg FILE`), cycle members
filled, the edges inside a cycle and the kernels' edges to tensor/tape in red.

The conventions are those of tests/architecture/check_layering.cmake (ctest -R
architecture.layering): the files are the .h and .cpp files under the folder, and an include is a
line matching `^[ \\t]*#[ \\t]*include[ \\t]*"...`, wherever it is (also under #if: it is a
dependency in some configuration). A quoted include is resolved as the compiler does for the
build: first from the including file's folder, then from the repository root (the include
directory of the tapegrad target, autograd/CMakeLists.txt), then from each -I DIR (a path from the
repository root; tests/fuzz/ needs `-I examples/bahdanau`, which its CMakeLists.txt adds for its
targets). Angle-bracket includes (the standard library, third-party packages) are not part of the
graph; a quoted include that resolves to no file is reported on stderr and ignored.

Issue 41 ("the engine as a ladder") is to bring `scripts/include_graph.py --check` to exit 0 for
autograd/; it then becomes a test beside architecture.layering.
"""
import argparse
import collections
import os
import re
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
SOURCE_EXTS = (".h", ".cpp")  # the files check_layering.cmake globs
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"')  # check_layering.cmake's pattern
KERNELS = "autograd/kernels"
# Headers that autograd/kernels/ may not include, directly or through another header (issue 41:
# kernels work on spans, shapes and strides and never see a Tensor or the tape). Headers split out
# of tensor.h or tape.h by the refactor belong here too.
FORBIDDEN_FOR_KERNELS = ("autograd/tensor.h", "autograd/tape.h")


class Graph:
    """The files reachable by quoted includes, parsed on demand. Paths are relative to root, '/'."""

    def __init__(self, root, include_dirs):
        self.root = root
        self.bases = [""] + include_dirs  # after the includer's own folder
        self.includes = {}  # file -> [(line number, include text, resolved file)]
        self.unresolved = []  # (file, line number, include text)

    def resolve(self, includer, text):
        for base in [os.path.dirname(includer)] + self.bases:
            path = os.path.normpath(os.path.join(base, text)).replace(os.sep, "/")
            inside = not (os.path.isabs(path) or path == ".." or path.startswith("../"))
            if inside and os.path.isfile(os.path.join(self.root, path)):
                return path
        return None

    def of(self, path):
        if path not in self.includes:
            found = []
            with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m:
                        target = self.resolve(path, m.group(1))
                        if target is None:
                            self.unresolved.append((path, n, m.group(1)))
                        else:
                            found.append((n, m.group(1), target))
            self.includes[path] = found
        return self.includes[path]

    def chain_to(self, start, goals):
        """A shortest include chain [start, ..., goal] from file start to one of goals, or None."""
        prev, queue = {start: None}, collections.deque([start])
        while queue:
            f = queue.popleft()
            if f in goals:
                chain = []
                while f is not None:
                    chain.append(f)
                    f = prev[f]
                return chain[::-1]
            for _, _, t in self.of(f):
                if t not in prev:
                    prev[t] = f
                    queue.append(t)
        return None


def fail(message):
    """A usage error: exit status 2, as argparse's, so that 1 keeps meaning --check failed."""
    print(f"include_graph.py: {message}", file=sys.stderr)
    sys.exit(2)


def unit_of(path):
    stem, ext = os.path.splitext(path)
    return stem if ext in SOURCE_EXTS else path


def folder_files(root, folder):
    files = []
    for dirpath, dirnames, names in os.walk(os.path.join(root, folder)):
        dirnames.sort()
        for name in names:
            if name.endswith(SOURCE_EXTS):
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                files.append(rel.replace(os.sep, "/"))
    return sorted(files)


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iterative; components in a deterministic order, members sorted."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(sorted(comp))
    return sorted(comps, key=lambda c: c[0])


def shortest_cycle_through(start, edges, members):
    """A shortest cycle [start, ..., start] inside members (breadth-first), or None."""
    prev, queue = {start: None}, collections.deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(edges[v]):
            if w not in members:
                continue
            if w == start:
                path = [start]
                while v is not None:
                    path.append(v)
                    v = prev[v]
                return path[::-1]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def print_cycle(cycle, evidence, indent):
    for a, b in zip(cycle, cycle[1:]):
        f, n, text = evidence[(a, b)][0]
        more = len(evidence[(a, b)]) - 1
        print(f"{indent}{a} -> {b}: {f}:{n}: #include \"{text}\""
              + (f" (and {more} more)" if more else ""))


def write_dot(path, folder, units, edges, comps, kernel_edges):
    in_cycle = {u for c in comps for u in c}
    comp_of = {u: i for i, c in enumerate(comps) for u in c}

    def name(u):
        return u[len(folder) + 1:] if u.startswith(folder + "/") else u

    lines = ["digraph includes {", '  rankdir=BT; node [shape=box, fontsize=10];',
             f'  label="include graph of {folder}/ by unit (scripts/include_graph.py)";']
    by_dir = collections.defaultdict(list)
    for u in units:
        by_dir[os.path.dirname(u)].append(u)
    for i, (d, us) in enumerate(sorted(by_dir.items())):
        sub = d != folder
        if sub:
            lines.append(f'  subgraph "cluster_{i}" {{ label="{d}/";')
        for u in us:
            style = ', style=filled, fillcolor="#f4b6b6"' if u in in_cycle else ""
            lines.append(f'  {"  " if sub else ""}"{u}" [label="{name(u)}"{style}];')
        if sub:
            lines.append("  }")
    for a in units:
        for b in sorted(edges[a]):
            red = (a in comp_of and comp_of.get(b) == comp_of[a]) or (a, b) in kernel_edges
            lines.append(f'  "{a}" -> "{b}"' + (" [color=red];" if red else ";"))
    lines.append("}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("folder", nargs="?", default="autograd",
                        help="folder to analyse, from the current directory or the repository "
                             "root (default: autograd)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if there is an include cycle or a forbidden kernel include")
    parser.add_argument("--dot", metavar="FILE", help="also write the unit graph for Graphviz")
    parser.add_argument("--per-unit", action="store_true",
                        help="print a shortest cycle through each unit of each cycle")
    parser.add_argument("-I", "--include-dir", action="append", default=[], metavar="DIR",
                        help="another include directory, from the repository root (repeatable)")
    parser.add_argument("--root", default=ROOT,
                        help="repository root (default: the one holding this script)")
    args = parser.parse_args()
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head

    root = os.path.realpath(args.root)
    folder = args.folder  # from the current directory if it is there, else from the root
    if os.path.isdir(folder):
        folder = os.path.relpath(os.path.realpath(folder), root)
    folder = os.path.normpath(folder).replace(os.sep, "/")
    if (os.path.isabs(folder) or folder in (".", "..") or folder.startswith("../")
            or not os.path.isdir(os.path.join(root, folder))):
        fail(f"{args.folder} is not a folder inside {root}")
    include_dirs = [os.path.normpath(d).replace(os.sep, "/") for d in args.include_dir]
    for d in include_dirs:
        if not os.path.isdir(os.path.join(root, d)):
            fail(f"no include directory {d} in {root}")

    graph = Graph(root, include_dirs)
    files = folder_files(root, folder)
    units = collections.defaultdict(list)  # unit -> its files
    for f in files:
        units[unit_of(f)].append(f)
    unit_names = sorted(units)
    edges = {u: set() for u in unit_names}
    evidence = collections.defaultdict(list)  # (unit, unit) -> [(file, line, include text)]
    for f in files:
        for n, text, target in graph.of(f):
            a, b = unit_of(f), unit_of(target)
            if b in edges and a != b:
                edges[a].add(b)
                evidence[(a, b)].append((f, n, text))

    n_edges = sum(len(e) for e in edges.values())
    print(f"{folder}/: {len(unit_names)} units ({len(files)} files), {n_edges} dependencies "
          "between units")
    width = max((len(u) for u in unit_names), default=0)
    for u in unit_names:
        print(f"  {u.ljust(width)}  " + " ".join(os.path.basename(f) for f in units[u]))

    comps = [c for c in strongly_connected(unit_names, edges) if len(c) > 1]
    print()
    print(f"include cycles (strongly connected components of more than one unit): {len(comps)}")
    for i, comp in enumerate(comps, 1):
        members = set(comp)
        cycles = {u: shortest_cycle_through(u, edges, members) for u in comp}
        best = min(comp, key=lambda u: (len(cycles[u]), u))
        print(f"cycle {i}: {len(comp)} units: " + ", ".join(comp))
        print(f"  a shortest cycle, {len(cycles[best]) - 1} includes:")
        print_cycle(cycles[best], evidence, "    ")
        if args.per_unit:
            for u in comp:
                print(f"  through {u}, {len(cycles[u]) - 1} includes:")
                print_cycle(cycles[u], evidence, "    ")

    kernel_includes, kernel_edges = [], set()
    if (KERNELS + "/").startswith(folder + "/"):
        goals = set(FORBIDDEN_FOR_KERNELS)
        for f in (f for f in files if f.startswith(KERNELS + "/")):
            for n, text, target in graph.of(f):
                chain = graph.chain_to(target, goals)
                if chain:
                    kernel_includes.append((f, n, text, chain))
                    if len(chain) == 1:
                        kernel_edges.add((unit_of(f), unit_of(target)))
        direct = [k for k in kernel_includes if len(k[3]) == 1]
        print()
        print(f"includes in {KERNELS}/ of " + " or ".join(FORBIDDEN_FOR_KERNELS)
              + f": {len(kernel_includes)} ({len(direct)} direct, "
              f"{len(kernel_includes) - len(direct)} through another header), in "
              f"{len({k[0] for k in kernel_includes})} files")
        for f, n, text, chain in sorted(kernel_includes, key=lambda k: (len(k[3]) > 1, k[0], k[1])):
            via = "" if len(chain) == 1 else "  via " + " -> ".join(chain)
            print(f"  {f}:{n}: #include \"{text}\"{via}")

    for f, n, text in graph.unresolved:
        print(f"include_graph.py: warning: {f}:{n}: #include \"{text}\" resolves to no file "
              "(ignored)", file=sys.stderr)
    if args.dot:
        write_dot(args.dot, folder, unit_names, edges, comps, kernel_edges)
    if args.check and (comps or kernel_includes):
        print(f"include_graph.py --check: {len(comps)} include cycles, {len(kernel_includes)} "
              "forbidden kernel includes", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
