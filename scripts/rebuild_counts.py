#!/usr/bin/env python3
"""How many translation units recompile when a header is touched.

    scripts/rebuild_counts.py [--build DIR] [--markdown] [HEADER...]

Reads the header dependencies that Ninja recorded for every object file of an existing build
(`ninja -C DIR -t deps`, which reads DIR/.ninja_deps and compiles nothing) and prints, for each
HEADER (default: every .h under autograd/, nn/ and models/), the number of object files whose
dependencies include it, split by the top-level folder of the object's source: the library
(autograd/, nn/, models/), tests/, bench/, examples/. A source compiled into two targets counts
twice, as ninja compiles it twice. A HEADER is a path from the current directory or from the
repository root. --markdown prints a Markdown table. The counts are those of DIR's last build: a
warning on stderr says when objects are older than a file they depend on, or were never built
(build first).
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
LIBRARY = ("autograd", "nn", "models")
OTHERS = ("tests", "bench", "examples")
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")


def ninja_tool(build, *tool):
    try:
        return subprocess.run(["ninja", "-C", build, "-t", *tool], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"rebuild_counts.py: `ninja -C {build} -t {' '.join(tool)}` failed: {e}")


def read_deps(build):
    """{object path (relative to build): [dependency paths, absolute and normalised]}."""
    deps, current = {}, None
    for line in ninja_tool(build, "deps").splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():  # "OBJ: #deps N, deps mtime M (VALID)"
            current = line.split(": #deps ", 1)[0]
            deps[current] = []
        elif current is not None:
            path = os.path.join(build, line.strip())  # an absolute path stays as it is
            deps[current].append(os.path.normpath(path))
    return deps


def top_folder(path):
    rel = os.path.relpath(path, ROOT)
    return rel.split(os.sep, 1)[0] if not rel.startswith("..") else "(outside)"


def source_of(dep_list):
    for d in dep_list:
        if d.endswith(SOURCE_SUFFIXES):
            return d
    return dep_list[0] if dep_list else ""


def out_of_date(build, deps):
    """Objects older than a file of the repository they depend on (or missing)."""
    mtimes, stale = {}, []

    def mtime(path):
        if path not in mtimes:
            try:
                mtimes[path] = os.stat(path).st_mtime_ns
            except OSError:
                mtimes[path] = None
        return mtimes[path]

    for obj, dep_list in deps.items():
        t = mtime(os.path.join(build, obj))
        newer = [d for d in dep_list
                 if d.startswith(ROOT + os.sep) and (mtime(d) is None or t is None or mtime(d) > t)]
        if newer:
            stale.append((obj, newer[0]))
    return stale


def default_headers():
    headers = []
    for folder in LIBRARY:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            headers += [os.path.join(dirpath, f) for f in files if f.endswith(".h")]
    return sorted(os.path.relpath(h, ROOT) for h in headers)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("headers", nargs="*", metavar="HEADER")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="Ninja build directory (default: build/)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    if not os.path.isfile(os.path.join(build, ".ninja_deps")):
        sys.exit(f"rebuild_counts.py: no {build}/.ninja_deps: build there first (Ninja generator)")

    deps = read_deps(build)
    folder_of = {obj: top_folder(source_of(d)) for obj, d in deps.items()}
    folders = ["library"] + list(OTHERS)
    extra = sorted({f for f in folder_of.values() if f not in LIBRARY + OTHERS})
    folders += extra  # sources outside the known folders, if any, get a column of their own

    def column(obj):
        return "library" if folder_of[obj] in LIBRARY else folder_of[obj]

    users = {}  # file (absolute) -> objects that depend on it
    for obj, dep_list in deps.items():
        for d in set(dep_list):
            users.setdefault(d, []).append(obj)

    # A HEADER is found from the current directory, else from the repository root.
    headers = [os.path.relpath(os.path.abspath(h) if os.path.isfile(h) else os.path.join(ROOT, h),
                               ROOT) for h in args.headers]
    missing = [h for h in headers if not os.path.isfile(os.path.join(ROOT, h))]
    if missing:
        sys.exit("rebuild_counts.py: no such header: " + ", ".join(missing))
    rows = []
    for rel in headers or default_headers():
        counts = dict.fromkeys(folders, 0)
        for obj in users.get(os.path.join(ROOT, rel), []):
            counts[column(obj)] += 1
        rows.append((rel, [counts[f] for f in folders]))

    totals = dict.fromkeys(folders, 0)
    for obj in deps:
        totals[column(obj)] += 1
    caption = (f"Object files in {os.path.relpath(build, ROOT)}/: {len(deps)}, of which "
               + ", ".join(f"{totals[f]} {f}" for f in folders)
               + " (library: sources in " + ", ".join(f + "/" for f in LIBRARY) + ").")
    head = ["header"] + folders + ["total"]
    body = [[f"`{rel}`" if args.markdown else rel] + [str(c) for c in cs] + [str(sum(cs))]
            for rel, cs in rows]
    if args.markdown:
        print(caption)
        print()
        print("| " + " | ".join(head) + " |")
        print("|---" + "|---:" * (len(head) - 1) + "|")
        for r in body:
            print("| " + " | ".join(r) + " |")
    else:
        print(caption)
        widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
        for r in [head] + body:
            cells = [c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)]
            print("  ".join(cells))

    # An object ninja never built has no recorded dependencies and would be missing from the counts.
    objects = {line.split(": ", 1)[0] for line in ninja_tool(build, "targets", "all").splitlines()}
    never_built = sorted(o for o in objects if o.endswith((".o", ".obj")) and o not in deps)
    if never_built:
        print(f"rebuild_counts.py: warning: {len(never_built)} object files of "
              f"{os.path.relpath(build, ROOT)}/build.ninja were never built (e.g. {never_built[0]})"
              " and are not counted; build everything first",
              file=sys.stderr)
    stale = out_of_date(build, deps)
    if stale:
        obj, dep = stale[0]
        print(f"rebuild_counts.py: warning: {len(stale)} of {len(deps)} objects are older than a "
              f"file they depend on (e.g. {obj}: {os.path.relpath(dep, ROOT)}); build first for "
              "current counts",
              file=sys.stderr)


if __name__ == "__main__":
    main()
