#!/usr/bin/env python3
"""Size discipline for hcpsim's sources: a non-kernel source file has at most 600 lines and a function at most
100 lines (from the line of its opening brace to the line of its closing brace).

Usage: check_sizes.py [REPO_ROOT]   (default: the folder above this script)
       check_sizes.py --self-test    (checks the function scanner on synthetic sources)
Exit 0 when every file and function fits or is within its ratchet entry, 1 otherwise (one line per finding).

Kernel sources (*.cu, *.cuh) are exempt: a tiled kernel is long by nature. Files and functions that do not
fit yet are listed in scripts/size_ratchet.txt with their current size; they may shrink but not grow, and an
entry that fits (or no longer exists) must be removed, so the list only ever gets shorter.

Functions are found with a small C++ scanner (comments, string and character literals are skipped): a brace
block counts as a function body when the text before it ends in a parameter list (optionally followed by
qualifiers, a trailing return type or a constructor's member initialisers) and it is not a control statement,
a class, a namespace or a lambda inside another function (lambdas count towards their enclosing function).
"""
import os
import re
import sys

from repo_files import repo_files

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100
SOURCE_EXTENSIONS = (".cpp", ".hpp", ".h", ".cc")
KERNEL_EXTENSIONS = (".cu", ".cuh")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*(\(|$)")
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")


def strip_code(text):
    """The text with comments and literals replaced by spaces (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                j = n if end < 0 else end + len(m.group(1)) + 2
                out.append(re.sub(r"[^\n]", " ", text[i:j]))
                i = j
            else:
                out.append(c)
                i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " ")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_function_header(header):
    h = " ".join(header.split())
    if not h or SCOPE.search(h) or CONTROL.search(h):
        return False
    if h.startswith("=") or h.endswith("=") or h.endswith("]") or "[" in h.split("(")[0][-3:]:
        return False
    # Constructor initialiser lists: "X(...) : a_(b), c_{d}" — look at the text before the first top-level ':'.
    m = re.search(r"\)\s*(const|noexcept|override|final|mutable|volatile|&|&&|\s)*(->\s*[\w:<>,\s*&]+)?$", h)
    if m:
        return not re.search(r"\]\s*\([^()]*\)\s*(mutable\s*)?(->\s*[\w:<>,\s*&]+)?$", h)  # a lambda
    return bool(re.search(r"\)\s*:\s*[\w:]+\s*[({]", h))


def functions(stripped):
    """(name line, first line, last line) of every function body at namespace or class scope."""
    found = []
    stack = []  # per open brace: (kind, start_line)
    header_start = 0
    line = 1
    for i, c in enumerate(stripped):
        if c == "\n":
            line += 1
        elif c == "{":
            in_function = any(kind == "function" for kind, _ in stack)
            header = stripped[header_start:i]
            kind = "function" if not in_function and is_function_header(header) else "block"
            stack.append((kind, line))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start = stack.pop()
                if kind == "function":
                    found.append((start, line))
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def function_name(lines, start):
    """A readable name for the function whose body opens on line `start` (1-based)."""
    text = " ".join(l.strip() for l in lines[max(0, start - 4):start])
    m = re.findall(r"([~\w:]+)\s*\(", text)
    return m[-1] if m else "?"


def load_ratchet(root):
    path = os.path.join(root, "scripts", "size_ratchet.txt")
    entries = {}
    if os.path.exists(path):
        for raw in open(path, encoding="utf-8"):
            raw = raw.split("#", 1)[0].strip()
            if raw:
                key, size = raw.rsplit(None, 1)
                entries[key] = int(size)
    return entries


def self_test():
    """Checks the scanner on synthetic sources, so that the size check itself can fail (exit 1 on a mismatch)."""
    body = lambda n: "\n".join(["  x += 1;"] * n)
    cases = [
        # (source, expected function lengths in lines)
        ("int f(int x) {\n" + body(98) + "\n}\n", [100]),
        ("int f(int x) {\n" + body(99) + "\n}\n", [101]),
        # control blocks, a lambda and a string with a brace stay inside their function
        ('void g() {\n  if (a) {\n    auto l = [&](int y) { return y; };\n  }\n  const char* s = "{";\n}\n', [6]),
        # class methods, a constructor with an initialiser list, a namespace; a struct is not a function
        ("namespace n {\nstruct S {\n  int a_;\n  S(int a) : a_(a) {\n  }\n  int get() const {\n    return a_;\n"
         "  }\n};\n}  // namespace n\n", [2, 3]),
        # a brace in a comment does not open a block; a trailing return type is a function
        ("// {\nauto h() -> int {\n  /* } */ return 1;\n}\n", [3]),
    ]
    failures = 0
    for source, expected in cases:
        got = [end - start + 1 for start, end in functions(strip_code(source))]
        if sorted(got) != sorted(expected):
            print(f"self-test: expected function lengths {expected}, found {got} in:\n{source}")
            failures += 1
    print(f"size check self-test: {len(cases) - failures}/{len(cases)} cases")
    return 1 if failures else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    ratchet = load_ratchet(root)
    seen = set()
    problems = []

    def check(key, size, limit, what):
        if size <= limit:
            if key in ratchet:
                problems.append(f"{key}: {what} fits now ({size} <= {limit}); remove it from scripts/size_ratchet.txt")
            return
        seen.add(key)
        allowed = ratchet.get(key)
        if allowed is None:
            problems.append(f"{key}: {what} has {size} lines, more than {limit}; split it")
        elif size > allowed:
            problems.append(f"{key}: {what} grew to {size} lines (ratchet {allowed}, limit {limit}); split it")

    for rel in repo_files(root):
        if not rel.endswith(SOURCE_EXTENSIONS) or rel.endswith(KERNEL_EXTENSIONS):
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        lines = text.split("\n")
        check(rel, len(lines) - (1 if text.endswith("\n") else 0), MAX_FILE_LINES, "file")
        for start, end in functions(strip_code(text)):
            check(f"{rel}:{function_name(lines, start)}", end - start + 1, MAX_FUNCTION_LINES, "function")
    for key in sorted(set(ratchet) - seen):
        if not any(p.startswith(key + ":") for p in problems):
            problems.append(f"{key}: listed in scripts/size_ratchet.txt but not found or fits; remove the entry")
    for p in problems:
        print(p)
    if problems:
        print(f"size check: {len(problems)} finding(s); limits {MAX_FILE_LINES} lines per file, "
              f"{MAX_FUNCTION_LINES} per function (docs/architecture.md \"Size limits\")")
        return 1
    print(f"size check: every source file <= {MAX_FILE_LINES} lines and function <= {MAX_FUNCTION_LINES} lines "
          f"({len(ratchet)} ratchet entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
