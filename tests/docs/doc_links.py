#!/usr/bin/env python3
"""doc_links.py: every citation in the repository resolves inside it. Fails
on a relative Markdown link in README.md, DEVELOPERS.md or docs/*.md whose
target does not exist, and on a citation of the team's reference notes
outside the repository (`../shared/reference/...`; their facts and sources
are docs/reference-*.md) in those pages or in src/, include/, tests/ or
bench/. (Benchmarks may still read data sets from ../shared/traces: that is
data, too large for the repository, not a citation.)

Usage: doc_links.py SOURCE_ROOT
       doc_links.py --self-test
"""

import glob
import os
import re
import sys

LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE_RE = re.compile(r"\.\./shared/reference")
SOURCE_EXT = (".c", ".h", ".py", ".sh", ".build")


def pages(root):
    found = [os.path.join(root, n) for n in ("README.md", "DEVELOPERS.md")]
    found += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return [p for p in found if os.path.exists(p)]


def sources(root):
    for top in ("src", "include", "tests", "bench"):
        for d, _dirs, files in os.walk(os.path.join(root, top)):
            for n in sorted(files):
                if n.endswith(SOURCE_EXT) and n != "doc_links.py":
                    yield os.path.join(d, n)


def check_page(path, text, exists):
    """Problems of one Markdown page; `exists` tells whether a path exists."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        if OUTSIDE_RE.search(line):
            out.append("%s:%d: cites a path outside the repository: %s" % (path, no, line.strip()))
        for target in LINK_RE.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # https:, mailto:, an anchor of the same page
            file = target.split("#", 1)[0]
            if not exists(os.path.normpath(os.path.join(os.path.dirname(path), file))):
                out.append("%s:%d: link to a missing file: %s" % (path, no, target))
    return out


def check_source(path, text):
    return ["%s:%d: cites a path outside the repository: %s" % (path, no, line.strip())
            for no, line in enumerate(text.splitlines(), 1) if OUTSIDE_RE.search(line)]


def self_test():
    have = {"docs/a.md", "docs/reference-mig.md", "README.md"}
    ok = "See [mig](reference-mig.md#profiles), [web](https://x.org/a), [here](#top), [r](../README.md)."
    assert check_page("docs/a.md", ok, have.__contains__) == []
    bad = "Facts: [fabric](../shared/reference/fabric.md) and [gone](nope.md)."
    got = check_page("docs/a.md", bad, have.__contains__)
    assert len(got) == 3 and "outside" in got[0] and "missing" in got[1] and "nope.md" in got[2], got
    assert check_source("src/x.c", "/* Facts: ../shared/reference/mig.md */")
    assert not check_source("src/x.c", "/* Facts: docs/reference-mig.md */")
    print("doc_links: self-test ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    problems = []
    for p in pages(root):
        with open(p, encoding="utf-8") as f:
            problems += check_page(os.path.relpath(p, root), f.read(),
                                   lambda rel: os.path.exists(os.path.join(root, rel)))
    n = 0
    for p in sources(root):
        n += 1
        with open(p, encoding="utf-8", errors="replace") as f:
            problems += check_source(os.path.relpath(p, root), f.read())
    for line in problems:
        print(line)
    if problems:
        return 1
    print("doc_links: %d pages and %d source files cite only what the repository holds"
          % (len(pages(root)), n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
