#!/usr/bin/env python3
"""Checks that the documentation cannot drift from the programs it describes.

Usage: docs_test.py SOURCE_DIR BIN_DIR

Reads README.md and docs/*.md under SOURCE_DIR and checks:

 (a) Flags. A program's accepted flags come from the program itself: a
     binary's `--help` (spotps binaries list every flag defined in spotps's
     sources, not absl's), a shell script's argument parsing (its `case`
     arms such as `--seconds=*)`, and the `[--flag]` forms of its usage
     comment), a Python script's argparse calls.
     * A heading whose text is a program's name or path (`### spotps-ps`,
       `### deploy/local/up.sh`) opens that program's section, up to the
       next heading of the same or a higher level. Every flag in a section
       must be one the program accepts, and every flag it accepts must
       appear in its section. The programs of REQUIRED_SECTIONS must each
       have exactly one section.
     * In a command line (a code block line, or a code span), a flag after a
       program's name belongs to that program, up to a shell separator
       (`|`, `;`, `&&`, `$(`, a comment): `spotps-ctl --ps=A status` checks
       --ps against spotps-ctl wherever it appears. Flags after another
       tool's name (cmake, bazel, sbatch, ...) must be on that tool's entry
       of OTHER_PROGRAMS, a short explicit allow-list.
     * Any other flag must be accepted by at least one spotps program.
 (b) Every relative link and #anchor in those files resolves: the file or
     folder exists, and the anchor is a heading of the target file by
     GitHub's rule (lowercase; punctuation but '-' and '_' removed; spaces
     to '-'; repeats get -1, -2, ...).
 (c) README.md has at most README_MAX_LINES lines.
 (d) No line dates itself by a period of work ("session N", "issue N",
     "(issue", "sprint", a month and year).

Exits 1 and prints one line per problem (FILE:LINE: what is wrong), or 0.
A binary missing from BIN_DIR is a failure: build first.
"""

import os
import re
import subprocess
import sys

README_MAX_LINES = 350

BINARIES = (
    "spotps-ps",
    "spotps-trainer",
    "spotps-generate",
    "spotps-tokenize",
    "spotps-ctl",
    "spotps-client-example",
    "spotps-bench-transport",
    "spotps-bench-trainer",
    "spotps-bench-convergence",
    "spotps-bench-scaling",
    "spotps-bench-churn",
)
# Names that run another program with the same flags.
ALIASES = {"spotps-trainer-core": "spotps-trainer"}
# Scripts, by their path in the repository.
SCRIPTS = (
    "deploy/local/up.sh",
    "deploy/local/scale.sh",
    "deploy/local/finetune.sh",
    "deploy/slurm/submit.sh",
    "deploy/slurm/scale.sh",
    "deploy/slurm/local-cluster.sh",
    "deploy/docker/entrypoint.sh",
    "deploy/docker/build.sh",
    "deploy/install-deps.sh",
    "tests/run.sh",
    "trainer/data/prepare_corpus.sh",
    "client/python/examples/finetune.py",
    "tools/models/export_model.py",
    "deploy/local/fortunes_to_tsv.py",
    "tests/bench/ddp_comparison.sh",
    "tests/bench/torch_baseline.py",
)
# The entry point runs the binary its first argument names; the container
# image (spotps:VERSION) runs the entry point.
ENTRY_POINT = "deploy/docker/entrypoint.sh"
ENTRY_POINT_COMMANDS = {
    "ps": "spotps-ps",
    "trainer": "spotps-trainer",
    "ctl": "spotps-ctl",
    "generate": "spotps-generate",
    "tokenize": "spotps-tokenize",
    "client-example": "spotps-client-example",
}
IMAGE = re.compile(r"^spotps:[\w.]+$")

# Programs whose every flag must be documented in a section of their own.
REQUIRED_SECTIONS = BINARIES + (
    "deploy/local/up.sh",
    "deploy/local/scale.sh",
    "deploy/local/finetune.sh",
    "deploy/slurm/submit.sh",
    "deploy/slurm/scale.sh",
)

# Other programs' long options that the documentation uses in command lines.
OTHER_PROGRAMS = {
    "cmake": {"build", "install", "prefix"},
    "cpack": {"config"},
    "ctest": {"output-on-failure"},
    "bazel": {"jobs", "test_tag_filters", "output_user_root", "disk_cache"},
    "kubectl": {"replicas"},
    "aws": {"stack-name", "template-file", "parameter-overrides", "query", "output",
            "auto-scaling-group-name", "desired-capacity"},
    "sbatch": {"array", "partition", "requeue", "signal", "open-mode"},
    "srun": {"exact"},
    "pkg-config": {"cflags", "libs"},
    "docker": set(),
    "grpcurl": set(),
    "openssl": set(),
    "g++": set(),
    "apt-get": set(),
    # GoogleTest binaries (any name ending in _test).
    "gtest": {"gtest_filter", "gtest_also_run_disabled_tests"},
}

FLAG = re.compile(r"(?<![\w/.-])--([A-Za-z][\w-]*)")
HELP_FLAG_LINE = re.compile(r"^  --([A-Za-z0-9_]+)=(\S*)")
CASE_ARM = re.compile(r"--([a-z][\w-]*)(?:=\*)?\)")
USAGE_FLAG = re.compile(r"\[--([a-z][\w-]*)")
ARGPARSE = re.compile(r"add_argument\(\s*['\"]--([\w-]+)['\"]")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DATED = re.compile(
    r"\bsession\s+\d+|\bissue\s+#?\d+|\(issue\b|\bsprint\b|"
    r"\b(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december)\s+(?:\d{1,2},?\s+)?\d{4}\b",
    re.IGNORECASE)
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", "{", "}", "then", "do", "else"}


class Checker:
    def __init__(self, root, bin_dir):
        self.root = root
        self.bin_dir = bin_dir
        self.errors = []
        self.accepted = {}  # program -> set of flag names it accepts
        self.optional = {}  # program -> accepted flags a section need not name
        self.flags_checked = 0
        self.links_checked = 0

    def error(self, where, message):
        self.errors.append(f"{where}: {message}")

    # ----------------------------------------------------------------------
    # What each program accepts.

    def load_programs(self):
        for name in BINARIES:
            self.accepted[name] = self.binary_flags(name)
        for path in SCRIPTS:
            self.accepted[path] = self.script_flags(path)

    def binary_flags(self, name):
        path = os.path.join(self.bin_dir, name)
        if not os.access(path, os.X_OK):
            self.error(path, f"{name} is missing or not executable; build it first "
                             f"(cmake --build build), then run this test again")
            return set()
        try:
            run = subprocess.run([path, "--help"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, timeout=120,
                                 env=dict(os.environ, LC_ALL="C"))
        except (OSError, subprocess.TimeoutExpired) as e:
            self.error(path, f"cannot run {name} --help: {e}")
            return set()
        text = run.stdout.decode("utf-8", "replace")
        flags, booleans = set(), set()
        for m in map(HELP_FLAG_LINE.match, text.splitlines()):
            if m:
                flags.add(m.group(1))
                if m.group(2) in ("true", "false"):
                    booleans.add(m.group(1))
        if run.returncode != 0 or not flags:
            self.error(path, f"{name} --help exited {run.returncode} and listed "
                             f"{len(flags)} flags:\n{text}")
        # Accepted but never required: --help, and --noNAME for a boolean NAME.
        self.optional[name] = {"help"} | {"no" + b for b in booleans}
        return flags | self.optional[name]

    def script_flags(self, rel):
        path = os.path.join(self.root, rel)
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as e:
            self.error(rel, f"cannot read the script: {e}")
            return set()
        if rel.endswith(".py"):
            return {m.group(1) for line in lines for m in ARGPARSE.finditer(line)} | {"help"}
        flags = set()
        in_header = True
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("#"):
                if in_header:  # The usage comment: its [--flag] forms.
                    flags.update(m.group(1) for m in USAGE_FLAG.finditer(stripped))
                continue
            in_header = False
            flags.update(m.group(1) for m in CASE_ARM.finditer(line))
        return flags

    # ----------------------------------------------------------------------
    # Which program a word of a command line names.

    def program_of(self, word):
        """A tuple of programs, ("other", NAME), or None."""
        if IMAGE.match(word):
            return (ENTRY_POINT,)
        base = re.split(r"[/:]", word)[-1]
        if base in BINARIES:
            return (base,)
        if base in ALIASES:
            return (ALIASES[base],)
        scripts = tuple(s for s in SCRIPTS if word == s or word.endswith("/" + s))
        if not scripts:  # An installed copy, or a bare name (both scale.sh when bare).
            scripts = tuple(s for s in SCRIPTS if os.path.basename(s) == base)
        if scripts:
            return scripts
        if base in OTHER_PROGRAMS:
            return ("other", base)
        if re.fullmatch(r"[\w.-]+_test", base):
            return ("other", "gtest")
        return None

    def command_flags(self, text):
        """(flag, context) for every flag of a command line; context is what
        program_of returned for the command the flag belongs to, or None."""
        text = text.replace("$(", " ( ").replace("`", " ")
        out = []
        ctx = None
        entry_point = False
        target = None  # A program another tool's arguments name (bazel run T -- ...).
        for raw in text.split():
            if raw in SEPARATORS:
                ctx, entry_point, target = None, False, None
                continue
            if raw == "--":  # The end of a tool's own options: the rest is a command.
                if ctx and ctx[0] == "other":
                    ctx, target = target, None
                continue
            word = raw.lstrip("([{\"'")
            if raw != word and raw[0] in "(":
                ctx, entry_point, target = None, False, None
            ends_command = re.search(r"[);|&]$", word) is not None
            word = word.rstrip(")]}\"',;:|&.")
            if word.startswith("--"):
                m = FLAG.match(word)
                if m:
                    out.append((m.group(1), ctx))
            elif word:
                for m in re.finditer(r"(?<=[=\"'])--([A-Za-z][\w-]*)", raw):
                    out.append((m.group(1), None))  # VAR="--flag": no command.
                named = self.program_of(word)
                if entry_point and word in ENTRY_POINT_COMMANDS:
                    ctx = (ENTRY_POINT_COMMANDS[word],)
                    entry_point = False
                elif named is not None and ctx and ctx[0] == "other" and \
                        not IMAGE.match(word):
                    target = named  # An argument of the tool (a target, a name).
                elif named is not None:
                    ctx, target = named, None
                    entry_point = named == (ENTRY_POINT,)
            if ends_command:
                ctx, entry_point, target = None, False, None
        return out

    # ----------------------------------------------------------------------
    # The documents.

    def doc_files(self):
        files = ["README.md"]
        docs = os.path.join(self.root, "docs")
        if os.path.isdir(docs):
            files += sorted(os.path.join("docs", f) for f in os.listdir(docs) if f.endswith(".md"))
        else:
            self.error("docs", "the docs/ folder is missing")
        return files

    def read(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8") as f:
            return f.read().splitlines()

    def parse(self, rel):
        """Yields (line number, kind, text) with kind 'code' (a code block's
        logical line, continuations joined), 'comment' (its shell comment),
        'heading' or 'prose' (lines joined while a code span is open)."""
        in_code = False
        code, code_no = "", 0
        prose, prose_no = "", 0
        for no, line in enumerate(self.read(rel), 1):
            fence = FENCE.match(line)
            if prose and (fence or HEADING.match(line) or not line.strip()):
                yield prose_no, "prose", prose  # An unclosed backtick: give up on it.
                prose = ""
            if fence:
                in_code = not in_code
                continue
            if in_code:
                if not code:
                    code_no = no
                if line.rstrip().endswith("\\"):
                    code += line.rstrip()[:-1] + " "
                    continue
                logical, code = code + line, ""
                m = re.search(r"(^|\s)#", logical)  # A shell comment.
                command, comment = (logical[:m.start()], logical[m.end():]) if m else (logical, "")
                yield code_no, "code", command
                if comment:
                    yield code_no, "comment", comment
                continue
            if HEADING.match(line):
                yield no, "heading", line
                continue
            if not prose:
                prose_no = no
            prose += line
            if prose.count("`") % 2 == 1:
                prose += " "
                continue
            yield prose_no, "prose", prose
            prose = ""
        if prose:
            yield prose_no, "prose", prose

    def headings(self, rel):
        """The anchors of a file's headings, by GitHub's rule."""
        anchors, seen = set(), {}
        for _, kind, text in self.parse(rel):
            if kind != "heading":
                continue
            title = HEADING.match(text).group(2)
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # links: their text
            slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").replace("*", "").lower())
            slug = slug.replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
        return anchors

    def section_program(self, title):
        name = title.replace("`", "").strip()
        if name in BINARIES or name in SCRIPTS:
            return name
        return None

    def check_file(self, rel, sections):
        section = None  # (program, level, where)
        for no, kind, text in self.parse(rel):
            where = f"{rel}:{no}"
            if DATED.search(text):
                self.error(where, f"dates itself by a period of work "
                                  f"({DATED.search(text).group(0)!r}): {text.strip()}")
            if kind == "heading":
                m = HEADING.match(text)
                level, title = len(m.group(1)), m.group(2)
                if section and level <= section[1]:
                    section = None
                program = self.section_program(title)
                if program:
                    section = (program, level, where)
                    sections.setdefault(program, []).append((where, set()))
            if kind in ("code", "comment"):
                pairs = self.command_flags(text)
            else:
                spans = [m.group(2) for m in CODE_SPAN.finditer(text)]
                rest = CODE_SPAN.sub(" ", text)
                pairs = [p for s in spans for p in self.command_flags(s)]
                pairs += [(m.group(1), None) for m in FLAG.finditer(rest)]
                if kind == "prose":
                    self.check_links(rel, no, rest)
            for flag, ctx in pairs:
                self.check_flag(where, flag, ctx, section, sections)

    def check_flag(self, where, flag, ctx, section, sections):
        self.flags_checked += 1
        if ctx and ctx[0] == "other":
            if flag not in OTHER_PROGRAMS[ctx[1]]:
                self.error(where, f"--{flag} given to {ctx[1]} is not on its entry of "
                                  f"OTHER_PROGRAMS in tests/docs/docs_test.py")
            return
        if ctx is None and section is not None:
            ctx = (section[0],)
        if ctx is not None:
            if not any(flag in self.accepted.get(p, set()) for p in ctx):
                names = " or ".join(ctx)
                known = sorted(self.accepted.get(ctx[0], set()) -
                               self.optional.get(ctx[0], set()))
                self.error(where, f"--{flag} is not a flag of {names}"
                                  + (f" (in the section at {section[2]})" if section and
                                     ctx == (section[0],) else "")
                                  + f"; it accepts: {' '.join('--' + k for k in known)}")
            if section is not None and section[0] in ctx:
                sections[section[0]][-1][1].add(flag)
            return
        if not any(flag in flags for flags in self.accepted.values()):
            self.error(where, f"--{flag} is not a flag of any spotps program or script "
                              f"(name the program before it, or fix the name)")

    def check_links(self, rel, no, text):
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            self.links_checked += 1
            path, _, anchor = target.partition("#")
            where = f"{rel}:{no}"
            dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
            if dest.startswith(".."):
                self.error(where, f"link {target!r} leaves the repository")
                continue
            if not os.path.exists(os.path.join(self.root, dest)):
                self.error(where, f"link {target!r}: {dest} does not exist")
                continue
            if anchor:
                if not dest.endswith(".md") or not os.path.isfile(os.path.join(self.root, dest)):
                    self.error(where, f"link {target!r}: an anchor into {dest}, not a Markdown file")
                elif anchor not in self.headings(dest):
                    self.error(where, f"link {target!r}: {dest} has no heading with anchor "
                                      f"#{anchor}; it has: "
                                      + " ".join("#" + a for a in sorted(self.headings(dest))))

    def run(self):
        self.load_programs()
        if self.errors:  # Without every program's flags the rest would mislead.
            for e in self.errors:
                print(e)
            print(f"{len(self.errors)} program(s) could not be read; nothing else checked")
            return 1
        files = self.doc_files()
        sections = {}  # program -> [(where, flags seen)]
        for rel in files:
            if not os.path.isfile(os.path.join(self.root, rel)):
                self.error(rel, "missing")
                continue
            self.check_file(rel, sections)
        for program in REQUIRED_SECTIONS:
            if program not in sections:
                self.error("docs", f"no section documents {program}: add a heading "
                                   f"'### {program}' listing its flags")
        for program, found in sections.items():
            if len(found) > 1:
                self.error(found[1][0], f"a second section for {program} "
                                        f"(the first is at {found[0][0]})")
            where, seen = found[0]
            missing = sorted(self.accepted.get(program, set()) - {"help"} -
                             self.optional.get(program, set()) - seen)
            if missing:
                self.error(where, f"the section for {program} does not document "
                                  + " ".join("--" + f for f in missing)
                                  + f" (which {program} accepts)")
        readme = len(self.read("README.md")) if os.path.isfile(
            os.path.join(self.root, "README.md")) else 0
        if readme > README_MAX_LINES:
            self.error("README.md", f"{readme} lines; at most {README_MAX_LINES} "
                                    f"(move details into docs/)")
        for e in self.errors:
            print(e)
        if self.errors:
            print(f"{len(self.errors)} problem(s) in the documentation")
            return 1
        print(f"docs: {len(files)} files, {self.flags_checked} flags against "
              f"{len(self.accepted)} programs, {self.links_checked} links; "
              f"README.md {readme} lines")
        return 0


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root, bin_dir = (os.path.abspath(a) for a in sys.argv[1:])
    return Checker(root, bin_dir).run()


if __name__ == "__main__":
    sys.exit(main())
