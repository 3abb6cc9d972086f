#!/usr/bin/env python3
"""Module dependencies as a test: every `#include "hcpsim/<module>/..."` in a module's sources must follow the
arrows of docs/architecture.md, `core` includes only the standard library, and no public header of a library
module includes a third-party header (they stay in .cpp files). Exit 0 when all hold, 1 otherwise (one line per
finding: file:line, the include, the rule).

Usage: check_modules.py [REPO_ROOT]       (default: the folder above this script)
       check_modules.py --self-test       (checks the rules on synthetic includes)
"""
import os
import re
import sys

from repo_files import repo_files

# module -> hcpsim modules its sources may include (itself included). docs/architecture.md "Modules".
ALLOWED = {
    "core": {"core"},
    "config": {"config", "core"},
    "io": {"io", "core"},
    "interop": {"interop", "config", "io", "core"},
    "sim": {"sim", "config", "core", "io"},
    "step": {"step", "sim", "config", "core", "io"},
    "plan": {"plan", "step", "sim", "config", "core", "io"},
    "oracles": {"oracles", "core", "io"},
    "gpu": {"gpu", "core", "oracles", "io"},
}
THIRD_PARTY = ("yaml-cpp/", "nlohmann/", "fmt/", "boost/", "Eigen/", "hdf5", "H5", "CLI/", "omp.h", "catch2/",
               "cuda", "nccl", "mma.h", "cublas")
NEVER_IN = {"sim": ("Eigen/", "cuda", "nccl")}
SOURCE = (".cpp", ".hpp", ".cu", ".cuh", ".h")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def findings_for(module, rel, text):
    out = []
    public = "/include/" in rel
    for n, line in enumerate(text.split("\n"), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        kind, name = m.groups()
        where = f"{rel}:{n}: #include {kind}{name}{'>' if kind == '<' else kind}"
        target = re.match(r"hcpsim/([a-z_]+)/", name)
        if target and target.group(1) not in ALLOWED[module]:
            out.append(f"{where}: {module} may not use {target.group(1)} (docs/architecture.md \"Modules\")")
        third = kind == "<" and name.startswith(THIRD_PARTY)
        if module == "core" and kind == "<" and ("/" in name or name.endswith((".h", ".hpp"))):
            out.append(f"{where}: core includes only the standard library")
        elif third and any(name.startswith(p) for p in NEVER_IN.get(module, ())):
            out.append(f"{where}: {module} never includes Eigen or CUDA")
        elif third and public and not (module == "gpu" and name.startswith(("cuda", "nccl", "mma.h"))):
            out.append(f"{where}: a public header keeps third-party types out; include it in the .cpp")
    return out


def self_test():
    cases = [
        ("core", "core/src/a.cpp", '#include "hcpsim/config/scenario.hpp"', 1),
        ("core", "core/src/a.cpp", "#include <yaml-cpp/yaml.h>", 1),
        ("core", "core/src/a.cpp", "#include <vector>\n#include \"hcpsim/core/error.hpp\"", 0),
        ("sim", "sim/src/a.cpp", '#include "hcpsim/oracles/verify.hpp"', 1),
        ("sim", "sim/src/a.cpp", "#include <Eigen/Dense>", 1),
        ("sim", "sim/src/a.cpp", "#include <boost/graph/adjacency_list.hpp>", 0),
        ("sim", "sim/include/hcpsim/sim/a.hpp", "#include <boost/graph/adjacency_list.hpp>", 1),
        ("gpu", "gpu/include/hcpsim/gpu/a.hpp", "#include <cuda_runtime.h>", 0),
        ("plan", "plan/src/a.cpp", '#include "hcpsim/step/training_step.hpp"', 0),
        ("step", "step/src/a.cpp", '#include "hcpsim/plan/plan.hpp"', 1),
    ]
    bad = 0
    for module, rel, text, expected in cases:
        got = len(findings_for(module, rel, text))
        if got != expected:
            print(f"self-test: {module} {rel} {text!r}: expected {expected} finding(s), got {got}")
            bad += 1
    print(f"module check self-test: {len(cases) - bad}/{len(cases)} cases")
    return 1 if bad else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    for rel in repo_files(root):
        module = rel.split("/", 1)[0]
        if module not in ALLOWED or not rel.endswith(SOURCE) or not os.path.isfile(os.path.join(root, rel)):
            continue
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        problems += findings_for(module, rel, text)
    for p in problems:
        print(p)
    print(f"module check: {len(problems)} finding(s)" if problems else
          "module check: every include follows the module arrows; core is standard library only")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
