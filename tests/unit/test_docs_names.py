"""Every module, path and file a doc names in backticks exists.

- A dotted name whose first part is `scalestudy` or one of its packages (`planning.plan.load_plan`,
  `scalestudy.apps.base.App`) resolves to a module under workflow/scalestudy/ and, for what
  follows the module, to a name the module defines at its top level (a function, class,
  assignment or import) and then to a member of that class (a method, field or class
  attribute). Read from the source (ast), never imported: a page may name a rank program that
  imports torch. A member of a value that is not a class (`WALLTIME_USED.name`) is not checked.
- A path (a word with a `/`, or a file name with an extension: `workflow/rules/run.smk`,
  `apps/md.py`, `metrics.json`) resolves to a file or folder in the repository, from its root,
  from `workflow/` or from `workflow/scalestudy/`. A bare file name may also be one the code
  writes (it appears in the code under workflow/, profiles/ or scripts/: `runs.csv`). A path
  starting with a placeholder (`<results>/<study>/runs.csv`), in `results/` or in `.snakemake/`
  is made at run time: each of its literal parts must appear in that code. The map is held to
  every path; the other pages to the paths that start in the repository (PATHS_CHECKED).
- `<name>` and `*` are wildcards. In a path at least one file must match (`apps/<pkg>/env.yaml`);
  in a dotted name every package or module matching must hold the rest, and one at least
  (`scalestudy.apps.<pkg>.rank`: each app's rank program). `{a,b}` expands to both.

Absolute paths, `$VARIABLE` paths, URLs and names outside scalestudy are not checked."""

from __future__ import annotations

import ast
import functools
import itertools
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import docs  # noqa: E402  (tests/support/docs.py)

# The pages held to it: every page of the user docs and the map. The map (PATHS_CHECKED) is held
# to every path it names; the other pages to the paths that start in the repository (`docs/`,
# `workflow/rules/run.smk`, `apps/md.py`), since they also name a site's modules (`openmpi/4.1.5`),
# files of other projects (`tutorials/resource-tables.md`) and the user's own (`my-sweep.yaml`).
CHECKED_PAGES = docs.PAGES
PATHS_CHECKED = (docs.REPO / "docs" / "ARCHITECTURE.md",)

FILE_EXTENSIONS = (
    "py", "md", "yaml", "yml", "smk", "json", "jsonl", "csv", "toml", "txt", "sh", "cfg", "ini",
    "html", "png", "log", "lock",
)  # fmt: skip
EXTENSION = re.compile(r"\.(" + "|".join(FILE_EXTENSIONS) + r")$")
PLACEHOLDER = re.compile(r"<[^<>`]*>")
WILDCARD = re.compile(r"^(<\w+>|\*)$")
IDENTIFIER = r"(?:[A-Za-z_]\w*|<\w+>|\*)"
DOTTED = re.compile(rf"^[A-Za-z_]\w*(?:\.{IDENTIFIER})+$")
BRACES = re.compile(r"\{([^{}]*)\}")
# A path in these is made at run time: the default results_dir and Snakemake's own folder.
RUN_TIME_FOLDERS = ("results", ".snakemake")
SKIPPED_DIRS = {".git", ".venv", ".venv-lammps", ".venv-site", ".venv-site-mpich", ".site-modules",
                ".snakemake", "__pycache__", "node_modules", "results", ".pytest_cache", ".ruff_cache"}  # fmt: skip


def expand_braces(text: str) -> list[str]:
    """`a.{b, c}_d` -> `a.b_d`, `a.c_d` (every brace, left to right)."""
    match = BRACES.search(text)
    if not match:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    return [word for choice in match.group(1).split(",") for word in expand_braces(head + choice.strip() + tail)]


def named_words(span: str) -> list[str]:
    """The words of one inline code span that may name a module, path or file. A placeholder
    keeps its spaces out of the split (`<run dir>/history/`)."""
    span = PLACEHOLDER.sub(lambda m: m.group(0).replace(" ", "_"), span)
    words = []
    for text in expand_braces(span):
        for word in text.split():
            word = word.strip("()[],;:'\"").rstrip(".")
            if not word or word.startswith(("-", "/", "$", "~", "http", "`")) or "=" in word:
                continue
            words.append(word)
    return words


def code_spans(page: Path, with_blocks: bool = False) -> list[tuple[int, str]]:
    """Each inline code span outside fenced blocks, with its line; with_blocks, each line of a
    fenced block without a language too (the map's data-flow diagram)."""
    spans = [(number, match.group(0).strip("`").strip()) for number, line in docs.prose(page, keep_code=True)
             for match in docs.INLINE_CODE.finditer(line)]  # fmt: skip
    if with_blocks:
        for block in docs.blocks(page):
            if block.language in ("", "text"):
                spans += [(block.line + i, line) for i, line in enumerate(block.text.split("\n"), 1) if line.strip()]
    return sorted(spans)


class Repository:
    def __init__(self, root: Path):
        self.root = root
        self.package = root / "workflow" / "scalestudy"

    @functools.cached_property
    def packages(self) -> set[str]:
        """The first parts a dotted name may start with."""
        inside = (
            {p.name for p in self.package.iterdir() if (p / "__init__.py").exists()} if self.package.is_dir() else set()
        )
        return inside | {"scalestudy", "__main__"}

    @functools.cached_property
    def file_names(self) -> set[str]:
        names = set()
        for _folder, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            names.update(files)
            names.update(dirs)
        return names

    @functools.cached_property
    def code_text(self) -> str:
        """The text of the code that runs (the names it writes and reads)."""
        texts = []
        for top in ("workflow", "profiles", "scripts", "Snakefile"):
            base = self.root / top
            paths = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
            texts += [p.read_text(errors="replace") for p in paths if p.is_file() and "__pycache__" not in p.parts]
        return "\n".join(texts)

    # -- what a word is

    @functools.cached_property
    def top_entries(self) -> set[str]:
        """What a path that starts in the repository starts with (results/ is made at run time)."""
        entries = set()
        for base in (self.root, self.root / "workflow", self.package):
            if base.is_dir():
                entries.update(p.name for p in base.iterdir() if p.name not in SKIPPED_DIRS)
        return entries - {"results"}

    def problem(self, word: str, every_path: bool = True) -> str | None:
        """None when the word names something that exists (or is not a name this test reads),
        else what is wrong. Every path, or only those starting in the repository."""
        if EXTENSION.search(word) or "/" in word:
            if not every_path and ("/" not in word.strip("/") or word.split("/")[0] not in self.top_entries):
                return None
            return self.path_problem(word)
        if DOTTED.match(word) and word.split(".")[0] in self.packages:
            return self.dotted_problem(word)
        return None

    # -- paths

    def path_problem(self, word: str) -> str | None:
        parts = [p for p in word.split("/") if p]
        if not parts:
            return None
        if PLACEHOLDER.fullmatch(parts[0]) or parts[0] in RUN_TIME_FOLDERS:
            missing = [p for p in parts if not PLACEHOLDER.search(p) and p not in self.code_text]
            return f"a run-time path whose part {missing[0]!r} the code never names" if missing else None
        pattern = PLACEHOLDER.sub("*", "/".join(parts))
        if "/" not in pattern and not any(c in pattern for c in "*?["):
            if pattern in self.file_names or pattern in self.code_text:
                return None
            return "no file of that name in the repository, and the code never names it"
        for base in (self.root, self.root / "workflow", self.package):
            if any(base.glob(pattern)):
                return None
        return "no such file or folder (from the repository's root, workflow/ or workflow/scalestudy/)"

    # -- dotted names

    def dotted_problem(self, word: str) -> str | None:
        parts = word.split(".")
        if parts[0] != "scalestudy":
            parts = ["scalestudy", *parts]
        return self.resolve(self.root / "workflow", parts, [])

    def resolve(self, folder: Path, parts: list[str], done: list[str]) -> str | None:
        """Walk the package folders; the parts left after a module are names in it."""
        if not parts:
            return None
        part, rest = parts[0], parts[1:]
        if WILDCARD.match(part):
            # Followed by more parts, a wildcard stands for the packages (`apps.<pkg>.rank`: each
            # app's folder); last, for the modules too.
            children = sorted(p.stem for p in folder.iterdir() if not p.name.startswith(("_", "."))
                              and ((p / "__init__.py").exists() or (p.suffix == ".py" and not rest)))  # fmt: skip
            if not children:
                return f"nothing matches {part} in {'.'.join(done)}"
            for child in children:
                problem = self.resolve(folder, [child, *rest], done)
                if problem:
                    return problem
            return None
        package, module = folder / part, folder / f"{part}.py"
        if (package / "__init__.py").exists():
            return self.resolve(package, rest, [*done, part])
        if module.exists():
            return self.names_problem(module, rest, [*done, part])
        if (folder / "__init__.py").exists() and not self.names_problem(folder / "__init__.py", parts, done):
            return None
        return f"no module {'.'.join([*done, part])}, nor a name {part} in {'.'.join(done)}"

    def names_problem(self, source: Path, names: list[str], module: list[str]) -> str | None:
        if not names:
            return None
        if any(WILDCARD.match(n) for n in names):
            return f"a wildcard after the module {'.'.join(module)}"
        tree = ast.parse(source.read_text())
        defined = top_level(tree.body)
        where = ".".join(module)
        if names[0] not in defined:
            return f"{where} defines no {names[0]}"
        node = defined[names[0]]
        if len(names) > 1 and isinstance(node, ast.ClassDef) and names[1] not in members(node):
            return f"{where}.{names[0]} has no member {names[1]}"
        return None


def top_level(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a module (or a class body) defines, also inside its top-level if/try blocks."""
    defined: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        defined[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                defined[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            nested = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            nested += [stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
            defined.update(top_level(nested))
    return defined


def members(cls: ast.ClassDef) -> set[str]:
    """A class's members: its body's names and the attributes its methods set on self."""
    found = set(top_level(cls.body))
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                found.add(node.attr)
    return found


# `module` (`NAME`, `other`): the bare names in the parentheses right after a module are names in
# that module (a wrong module for a fact's names was how the map went wrong before).
MODULE_THEN_NAMES = re.compile(r"`([A-Za-z_][\w.]*)`\s*\(((?:[^()]|\([^()]*\))*)\)")
BARE_NAME = re.compile(r"`([A-Za-z_]\w*)`")


def names_beside_modules(page: Path, repository: Repository) -> list[tuple[int, str]]:
    """(line, `module.NAME`) for each bare name in parentheses right after a module's name."""
    found = []
    for number, line in docs.prose(page, keep_code=True):
        for match in MODULE_THEN_NAMES.finditer(line):
            module = match.group(1)
            if EXTENSION.search(module) or not DOTTED.match(module) or module.split(".")[0] not in repository.packages:
                continue
            found += [(number, f"{module}.{name.group(1)}") for name in BARE_NAME.finditer(match.group(2))]
    return found


def unresolved(page: Path, repository: Repository, every_path: bool = True) -> list[tuple[str, str]]:
    """(the word, where and what is wrong) for each name on a page that does not resolve; where
    every path is checked, the names in its plain fenced blocks too."""
    blocks = every_path
    words = [(line, word) for line, span in code_spans(page, with_blocks=blocks) for word in named_words(span)]
    found = []
    for line, word in sorted(words + names_beside_modules(page, repository)):
        problem = repository.problem(word, every_path)
        if problem:
            found.append((word, f"{page.relative_to(repository.root)}:{line}: `{word}`: {problem}"))
    return found


REPO = Repository(docs.REPO)


@pytest.mark.parametrize("page", CHECKED_PAGES, ids=lambda page: str(page.relative_to(docs.REPO)))
def test_every_name_in_backticks_exists(page):
    every_path = page in PATHS_CHECKED
    assert [where for word, where in unresolved(page, REPO, every_path)] == []


def test_a_missing_module_name_or_path_is_found(tmp_path):
    package = tmp_path / "workflow" / "scalestudy"
    (package / "apps").mkdir(parents=True)
    (package / "apps" / "base.py").write_text("")
    for folder in ("model", "apps", "apps/one", "apps/two"):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").write_text('"""doc"""\n')
    (package / "__init__.py").write_text("")
    (package / "model" / "paths.py").write_text(
        "import os\nRUNS = 'runs.csv'\nSCRIPT = 'launch.sh'\n\n\n"
        "class Layout:\n    kind: str\n\n    def run_dir(self):\n"
        "        self.made = 1\n\n\nif os.name:\n    LATE = 1\n"
    )
    (package / "apps" / "one" / "rank.py").write_text("")
    (package / "apps" / "two" / "app.py").write_text("")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "`model.paths.Layout.run_dir`, `scalestudy.model.paths.{RUNS, LATE}`, `Layout.made`,\n"
        "`model.paths.Layout.made`, `model/paths.py`, `<results>/<study>/runs.csv`, `runs.csv`,\n"
        "`model.paths` (`RUNS`, `Layout`, as `Layout.made`), `launch.sh` (`mpirun`), `model.paths` (`Gone`)\n"
        "`python -m scalestudy.apps.one.rank` `numpy.linalg` `--config a=b.yaml` `/proc/stat`\n"
        "```\n`model.gone` in a block\n```\n"
        "`model.gone`, `model.paths.Gone`, `model.paths.Layout.gone`, `model/gone.py`,\n"
        "`apps/<pkg>/rank.py` `apps/<pkg>/env.yaml` `scalestudy.apps.<pkg>.rank`\n"
        "`<results>/<study>/gone.csv` `gone.json`\n"
    )
    assert [where for _, where in unresolved(page, Repository(tmp_path))] == [
        "docs/page.md:3: `model.paths.Gone`: scalestudy.model.paths defines no Gone",
        "docs/page.md:8: `model.gone`: no module scalestudy.model.gone, nor a name gone in scalestudy.model",
        "docs/page.md:8: `model.paths.Gone`: scalestudy.model.paths defines no Gone",
        "docs/page.md:8: `model.paths.Layout.gone`: scalestudy.model.paths.Layout has no member gone",
        "docs/page.md:8: `model/gone.py`: no such file or folder (from the repository's root, workflow/ "
        "or workflow/scalestudy/)",
        "docs/page.md:9: `apps/<pkg>/env.yaml`: no such file or folder (from the repository's root, "
        "workflow/ or workflow/scalestudy/)",
        "docs/page.md:9: `scalestudy.apps.<pkg>.rank`: no module scalestudy.apps.two.rank, nor a name rank in "
        "scalestudy.apps.two",
        "docs/page.md:10: `<results>/<study>/gone.csv`: a run-time path whose part 'gone.csv' the code never names",
        "docs/page.md:10: `gone.json`: no file of that name in the repository, and the code never names it",
    ]


def test_a_user_page_is_held_to_the_paths_that_start_in_the_repository(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "workflow" / "scalestudy" / "model").mkdir(parents=True)
    (tmp_path / "workflow" / "scalestudy" / "model" / "__init__.py").write_text("")
    (tmp_path / "workflow" / "scalestudy" / "__init__.py").write_text("")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "`docs/page.md` `docs/gone.md` `model/gone.py` `openmpi/4.1.5` `my-sweep.yaml` `results/x/runs.csv`\n"
        "`model.gone`\n```\n`docs/gone.md` in a block\n```\n"
    )
    assert [where for _, where in unresolved(page, Repository(tmp_path), every_path=False)] == [
        "docs/page.md:1: `docs/gone.md`: no such file or folder (from the repository's root, workflow/ or "
        "workflow/scalestudy/)",
        "docs/page.md:1: `model/gone.py`: no such file or folder (from the repository's root, workflow/ or "
        "workflow/scalestudy/)",
        "docs/page.md:2: `model.gone`: no module scalestudy.model.gone, nor a name gone in scalestudy.model",
    ]


def test_the_map_reads_in_ten_minutes():
    """docs/ARCHITECTURE.md stays a map: a few hundred lines, each within 100 columns (a table's
    rows too), no link outside the repository."""
    page = docs.REPO / "docs" / "ARCHITECTURE.md"
    lines = page.read_text().split("\n")
    assert len(lines) <= 400
    assert [f"{number}: {len(line)} columns" for number, line in enumerate(lines, 1) if len(line) > 100] == []
    outside = [target for _, target in docs.links(page) if target.startswith(("http:", "https:", "../../", "/"))]
    outside += [
        target
        for _, target in docs.links(page)
        if not (page.parent / target.partition("#")[0]).resolve().is_relative_to(docs.REPO)
    ]
    assert outside == []


def test_the_layer_table_lists_every_package_in_the_contracts_order():
    """A listing of workflow/scalestudy/ is alphabetical: the map's layer table is where the order
    is seen, so it names every package (and the command line), top to bottom as the first import
    contract (pyproject.toml) orders the layers."""
    lines = (docs.REPO / "docs" / "ARCHITECTURE.md").read_text().split("\n")
    start = lines.index("| layer | what lives there | may import |") + 2
    rows = [line.split("|")[1].strip().strip("`") for line in itertools.takewhile(lambda line: line, lines[start:])]
    package = docs.REPO / "workflow" / "scalestudy"
    assert sorted(rows) == sorted(["__main__", *(p.name for p in package.iterdir() if (p / "__init__.py").is_file())])
    contract = tomllib.loads((docs.REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    ordered = [name.removeprefix("scalestudy.") for layer in contract["layers"] for name in layer.split(" | ")]
    assert rows == ordered
