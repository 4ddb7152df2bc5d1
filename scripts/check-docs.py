#!/usr/bin/env python3
"""Keeps README.md and docs/*.md honest: every relative link (images and #anchors included) resolves, every
```bash doc-test block runs, and every flag an `attnbench SUB ...` command in the docs names exists in SUB --help.

Usage: scripts/check-docs.py BUILD_DIR [--links-only]

A doc-test block is a fenced block whose info string is `bash doc-test`. The blocks of one page run in order, in one
fresh folder (so a block may read what an earlier block of its page wrote), under `bash -e -o pipefail`, with
BUILD_DIR/src first on PATH (so `attnbench` is the build's binary) and the repository's top-level entries linked in
(`build` links to BUILD_DIR). A block tagged `doc-file=NAME` (```json doc-file=my.json) is written there as NAME
for the blocks after it. Mark only commands that are cheap and run on the CPU backend: the check is a CTest.
Exit codes: 0 all good, 1 something broke (each failure named file:line), 2 bad usage.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBCOMMANDS = ("run", "list", "info", "compare", "sweep", "merge")
BLOCK_TIMEOUT_S = int(os.environ.get("DOC_TEST_TIMEOUT", "300"))
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(.*)$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*\"([^\"]+)\"", re.I)
HTML_ID = re.compile(r"<a\b[^>]*?\b(?:id|name)\s*=\s*\"([^\"]+)\"", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def doc_files():
    docs = os.path.join(ROOT, "docs")
    names = sorted(f for f in os.listdir(docs) if f.endswith(".md")) if os.path.isdir(docs) else []
    return [os.path.join(ROOT, "README.md")] + [os.path.join(docs, f) for f in names]


def rel(path):
    return os.path.relpath(path, ROOT)


def split_blocks(text):
    """(prose lines with their numbers, code blocks as (line, info, body lines)): fences never hold links."""
    prose, blocks, block = [], [], None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if block is None and m:
            block = (n, m.group(3).strip(), [], m.group(2))
        elif block is not None and m and m.group(2).startswith(block[3]) and not m.group(3).strip():
            blocks.append(block[:3])
            block = None
        elif block is not None:
            block[2].append(line)
        else:
            prose.append((n, line))
    return prose, blocks


def slug(heading):
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        prose, _ = split_blocks(open(path, encoding="utf-8").read())
        seen, out = {}, set()
        for _, line in prose:
            m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                out.add(s if s not in seen else f"{s}-{seen[s]}")
                seen[s] = seen.get(s, 0) + 1
            out.update(HTML_ID.findall(line))
        cache[path] = out
    return cache[path]


def ignored(path):
    """A link into a git-ignored path (a build folder, results/) resolves here but not in a clone."""
    r = subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", path], capture_output=True)
    return r.returncode == 0


def check_links(path):
    """(links checked, failures). Prose only, as one text, so that a link whose text wraps a line is seen too."""
    prose, _ = split_blocks(open(path, encoding="utf-8").read())
    numbers = [n for n, _ in prose]
    text = "\n".join(line for _, line in prose)
    text = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = [(m.start(), m.group(1)) for m in LINK.finditer(text)]
    found += [(m.start(), m.group(1)) for m in HTML_LINK.finditer(text)]
    found += [(m.start(), m.group(1)) for m in re.finditer(REF_DEF.pattern, text, re.M)]
    count, failures = 0, []
    for offset, target in sorted(found):
        n = numbers[text.count("\n", 0, offset)]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # a URL: not this check's to reach
        count += 1
        file_part, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        why = None
        if not (dest == ROOT or dest.startswith(ROOT + os.sep)):
            why = "outside the repository"
        elif not os.path.exists(dest):
            why = "no such file"
        elif ignored(dest):
            why = "a git-ignored path"
        elif frag and dest.endswith(".md") and frag not in anchors(dest):
            why = f"no heading with anchor #{frag} in {rel(dest)}"
        if why:
            failures.append(f"{rel(path)}:{n}: {target}: {why}")
    return count, failures


def documented_commands(path):
    """(line, words after 'attnbench') for each attnbench command in a code block or a code span."""
    text = open(path, encoding="utf-8").read()
    prose, blocks = split_blocks(text)
    found = []
    for start, info, body in blocks:
        if info.split()[:1] in ([], ["bash"], ["sh"], ["console"]):
            found += [(start + i + 1, line) for i, line in enumerate(body)]
    para = "\n".join(line for _, line in prose)
    for m in CODE_SPAN.finditer(para):
        span = " ".join(m.group(2).split())
        if span.split()[:1] and (span.split()[0] in SUBCOMMANDS and " --" in span):
            span = "attnbench " + span  # `run --group ...` in prose
        found.append((prose[para.count("\n", 0, m.start())][0], span))
    out = []
    for n, line in found:
        words = line.split()
        for i, w in enumerate(words):
            if w.endswith("attnbench") and i + 1 < len(words) and words[i + 1] in SUBCOMMANDS:
                rest = re.split(r"\s#\s", " ".join(words[i + 1:]) + " ")[0]  # drop a trailing comment
                out.append((n, rest))
    return out


def help_flags(binary, sub, cache={}):
    if sub not in cache:
        r = subprocess.run([binary, sub, "--help"], capture_output=True, text=True)
        # Option names only (CLI11 lists them as "  -g,--group TEXT"), not flags its descriptions mention.
        cache[sub] = set(re.findall(r"(?m)^\s*(?:-\w,)?(--[a-z][a-z0-9-]*)", r.stdout))
    return cache[sub]


def check_flags(path, binary):
    count, failures = 0, []
    for n, cmd in documented_commands(path):
        sub = cmd.split()[0]
        for flag in dict.fromkeys(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", cmd)):
            count += 1
            if flag not in help_flags(binary, sub):
                failures.append(f"{rel(path)}:{n}: attnbench {sub}: {flag} is not in `attnbench {sub} --help`")
    return count, failures


def workdir(build):
    """A fresh folder that looks like the repository root, so the docs' relative paths work and outputs land here."""
    d = tempfile.mkdtemp(prefix="attnbench-doc-test-")
    for name in os.listdir(ROOT):
        if name not in (".git", "build", "results"):
            os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def run_blocks(path, build):
    """(blocks run, failures). A block tagged doc-file=NAME is written to the folder as NAME, for later blocks."""
    _, blocks = split_blocks(open(path, encoding="utf-8").read())
    steps = []
    for n, info, body in blocks:
        tags = info.split()[1:]
        files = [t.split("=", 1)[1] for t in tags if t.startswith("doc-file=")]
        if files:
            steps.append((n, files[0], body))
        elif "doc-test" in tags:
            steps.append((n, None, body))
    if not any(name is None for _, name, _ in steps):
        return 0, []
    d = workdir(build)
    env = dict(os.environ, PATH=os.path.join(build, "src") + os.pathsep + os.environ.get("PATH", ""))
    count, failures = 0, []
    for n, name, body in steps:
        script = "\n".join(body) + "\n"
        if name is not None:
            if os.path.basename(name) != name:
                failures.append(f"{rel(path)}:{n}: doc-file={name}: a plain file name, please (no folders)")
                continue
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(script)
            continue
        count += 1
        try:
            r = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script], cwd=d,
                               env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
            rc, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out = f"timeout after {BLOCK_TIMEOUT_S} s", (e.stdout or b"").decode() + (e.stderr or b"").decode()
        print(f"doc-test {rel(path)}:{n}: {'ok' if rc == 0 else 'FAILED'}", flush=True)
        if rc != 0:
            tail = "\n".join("    " + l for l in out.replace("\r", "\n").rstrip().split("\n")[-30:])
            failures.append(f"{rel(path)}:{n}: doc-test block exited {rc}:\n{script.rstrip()}\n  output:\n{tail}")
    subprocess.run(["rm", "-rf", d])
    return count, failures


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    build = os.path.abspath(argv[1])
    binary = os.path.join(build, "src", "attnbench")
    links_only = "--links-only" in argv[2:]
    if not links_only and not os.access(binary, os.X_OK):
        print(f"check-docs: {binary}: no attnbench binary in that build folder (scripts/build.sh makes it)",
              file=sys.stderr)
        return 2
    links = flags = blocks = 0
    failures = []
    for path in doc_files():
        c, f = check_links(path)
        links, failures = links + c, failures + f
        if not links_only:
            c, f = check_flags(path, binary)
            flags, failures = flags + c, failures + f
            c, f = run_blocks(path, build)
            blocks, failures = blocks + c, failures + f
    # Never pass vacuously: a parser that stopped finding links or blocks would otherwise pass everything.
    if links == 0:
        failures.append("no relative links found in README.md and docs/*.md: the link check checked nothing")
    if not links_only and flags == 0:
        failures.append("no attnbench command flags found in the docs: the flag check checked nothing")
    if not links_only and blocks == 0:
        failures.append("no ```bash doc-test blocks found: the command check ran nothing")
    for f in failures:
        print(f"check-docs: {f}")
    print(f"check-docs: {len(doc_files())} files, {links} relative links, {flags} documented flags, "
          f"{blocks} doc-test blocks: {'FAILED, ' + str(len(failures)) + ' problem(s)' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
