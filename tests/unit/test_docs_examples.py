"""Every example in the docs (README.md, config/README.md, docs/*.md) is one the workflow takes.

A ```yaml block is loaded through the loaders Snakemake's run uses: a sweep through the study
loader with the site's rules (`scheduler.site.load_study`), a cluster file through
`config.clusters.load`. What the block is, is said by a note right before its fence:

    (no note)                                  a whole sweep file
    <!-- example: overlay on config/sweep.yaml -->      merged over those files (as --configfile A B)
    <!-- example: fragment of studies.NAME -->          a study's keys, merged into that study of
                                                        config/sweep.yaml (or `... in FILE`)
    <!-- example: cluster file -->                      config/clusters/<name>.yaml
    <!-- example: error -->                             must be refused (with another note: `error; ...`)

A ```bash block's `snakemake ...` lines are parsed by Snakemake's own argument parser and must
name profiles that exist, targets that are rules or files the workflow makes (of a study the
profile's sweep has), and no target where a config file goes; its `python -m scalestudy ...`
lines are parsed by the package's own command line and must name a subcommand and profiles
that exist; and every path into the repository a command names (scripts/, benchmarks/,
tests/, config/) exists."""

import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from scalestudy import __main__ as command_line
from scalestudy.apps.registry import APPS
from scalestudy.config import clusters, files
from scalestudy.model.errors import SweepError
from scalestudy.model.paths import COMPARE_FILES, PLOT_KINDS, Layout
from scalestudy.planning.plan import run_rule
from scalestudy.scheduler import site

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import docs  # noqa: E402  (tests/support/docs.py)

REPO = docs.REPO
SHIPPED_SWEEP = "config/sweep.yaml"
REPO_PATHS = ("scripts/", "benchmarks/", "tests/", "config/")  # profiles: checked as --profile

BLOCKS = [block for page in docs.PAGES for block in docs.blocks(page)]
YAML = [block for block in BLOCKS if block.language == "yaml"]
BASH = [block for block in BLOCKS if block.language == "bash"]


def where(block):
    return block.where


# ---------------------------------------------------------------- yaml: sweeps and cluster files


def directives(note: str | None) -> dict[str, str]:
    """`error; fragment of studies.x in F` -> {"error": "", "fragment": "studies.x in F"}."""
    found = {}
    for part in filter(None, (p.strip() for p in (note or "").split(";"))):
        for name in ("error", "overlay on", "fragment of", "cluster file"):
            if part == name or part.startswith(name + " "):
                found[name.split()[0]] = part[len(name) :].strip()
                break
        else:
            raise AssertionError(f"unknown example note {part!r}")
    return found


def load_example(block, tmp_path, monkeypatch):
    """Loads the block as what its note says it is; raises SweepError as the workflow would."""
    kind = directives(block.note)
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PROJECT", "ab12")  # a PBS site's project, as set at login
    raw = tmp_path / "example.yaml"
    raw.write_text(block.text)
    data = files.read_yaml(raw)  # a YAML mistake or a key given twice: SweepError with the line
    if "cluster" in kind:
        monkeypatch.setenv("SCALESTUDY_CLUSTERS_DIR", str(tmp_path))
        (tmp_path / f"{data['name']}.yaml").write_text(block.text)
        loaded = clusters.load(data["name"])
        shipped = REPO / "config/clusters" / f"{data['name']}.yaml"
        if shipped.exists():  # shown as the shipped file: it is the shipped file
            assert data == yaml.safe_load(shipped.read_text()), f"{block.where} differs from {shipped}"
        return loaded
    if "overlay" in kind:
        configfiles = [*kind["overlay"].split(), str(raw)]
    elif "fragment" in kind:
        study, _, base = kind["fragment"].partition(" in ")
        name = study.removeprefix("studies.")
        assert study.startswith("studies.") and name, f"{block.where}: fragment of studies.<name>"
        overlay = tmp_path / "fragment.yaml"
        overlay.write_text(yaml.safe_dump({"studies": {name: data}}))
        configfiles = [base.strip() or SHIPPED_SWEEP, str(overlay)]
    else:
        configfiles = [str(raw)]
    return site.load_study(files.load_files(*configfiles), files=configfiles)


@pytest.mark.parametrize("block", YAML, ids=where)
def test_every_yaml_example_loads_as_the_workflow_loads_it(block, tmp_path, monkeypatch):
    if "error" in directives(block.note):
        with pytest.raises(SweepError):
            load_example(block, tmp_path, monkeypatch)
    else:
        try:
            load_example(block, tmp_path, monkeypatch)
        except SweepError as error:
            pytest.fail(f"{block.where} ({block.note or 'a whole sweep'}):\n" + "\n".join(error.problems))


# ---------------------------------------------------------------- bash: command lines


def command_lines(block) -> list[list[str]]:
    """Each command of a bash block as its words, comments and line continuations removed."""
    text = block.text.replace("\\\n", " ")
    return [words for line in text.split("\n") if (words := shlex.split(line, comments=True))]


def rule_names() -> set[str]:
    sources = [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]
    named = {m.group(1) for path in sources for m in re.finditer(r"(?m)^(?:rule|checkpoint) (\w+):", path.read_text())}
    return named | {run_rule(app) for app in APPS}


def made_file(target: str) -> re.Match | None:
    """Whether a target is a file the workflow makes: a match naming its study, if it has one."""
    layout = Layout("\0R")
    templates = [
        layout.metrics("\0S", "\0P"),
        *(layout.table("\0S", name) for name in ("runs", "scaling", "variants")),
        *(layout.plot("\0S", kind) for kind in PLOT_KINDS),
        layout.provenance("\0S"),
        layout.report_html,
        layout.report_markdown,
        *(f"{layout.compare_dir}/{name}" for name in COMPARE_FILES.values()),
    ]
    groups = {"\0R": "(?P<results>.+)", "\0S": "(?P<study>[^/]+)", "\0P": "(?P<point>.+)"}
    for template in templates:
        pattern = re.escape(template)
        for placeholder, group in groups.items():
            pattern = pattern.replace(re.escape(placeholder), group, 1)
        if match := re.fullmatch(pattern, target):
            return match
    return None


def profile_problems(profile: str) -> list[str]:
    folder = REPO / profile
    if folder.parent != REPO / "profiles" or not (folder / "config.v8+.yaml").is_file():
        known = ", ".join(sorted(p.parent.name for p in (REPO / "profiles").glob("*/config.v8+.yaml")))
        return [f"--profile {profile}: no such profile; profiles/ has {known}"]
    return []


def profile_studies(profile: str | None, configfiles: list[str]) -> set[str] | None:
    """The studies a command's sweep has, where its files are the repository's."""
    if not configfiles and profile:
        configfiles = yaml.safe_load((REPO / profile / "config.v8+.yaml").read_text()).get("configfiles", [])
    configfiles = configfiles or [SHIPPED_SWEEP]
    if not all((REPO / name).is_file() for name in configfiles):
        return None  # the reader's own file (my-sweep.yaml)
    return set(files.load_files(*(REPO / name for name in configfiles))["studies"])


@pytest.fixture(scope="module")
def snakemake_parser():
    """Snakemake's own argument parser, without its plugins' options: importing a plugin may
    start a process (the Slurm executor asks whether `sacct` is there, when Snakemake is
    imported), which the unit tier refuses, and no command in the docs gives a plugin's option.
    The Snakemake modules this import brought in are taken out again afterwards, so that nothing
    later in the session meets registries without their plugins."""
    from snakemake_interface_common.plugin_registry import PluginRegistryBase

    def registries(cls=PluginRegistryBase):
        for sub in cls.__subclasses__():
            yield sub
            yield from registries(sub)

    before = set(sys.modules)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PluginRegistryBase, "collect_plugins", lambda self: setattr(self, "plugins", {}))
        for registry in registries():  # a singleton made earlier, with its plugins: set aside
            patch.setattr(registry, "_instance", None)
        import snakemake.cli

        yield snakemake.cli.get_argument_parser()
    for name in set(sys.modules) - before:
        if name.startswith("snakemake"):  # not numpy and the like, which load once per process
            del sys.modules[name]


def snakemake_problems(words: list[str], parser) -> list[str]:
    try:
        args = parser.parse_args(words)
    except SystemExit:
        return ["Snakemake's parser refuses it"]
    problems = [problem for profile in args.profile or [] for problem in profile_problems(profile)]
    rules = rule_names()
    configfiles = [str(name) for name in args.configfile or []]
    problems += [f"--configfile {name}: a target, read as a config file" for name in configfiles if name in rules]
    studies = None if problems else profile_studies((args.profile or [None])[0], configfiles)
    for target in sorted(args.targets or ()):
        made = made_file(target)
        if target in rules:
            continue
        if not made:
            rule_list = ", ".join(sorted(rules))
            problems.append(f"target {target}: neither a rule ({rule_list}) nor a file the workflow makes")
        elif "study" in made.groupdict() and studies is not None and made["study"] not in studies:
            problems.append(f"target {target}: no study {made['study']!r} in the sweep ({', '.join(sorted(studies))})")
    return problems


class Parsed(Exception):
    pass


def scalestudy_problems(words: list[str], monkeypatch) -> list[str]:
    """Parsed by `python -m scalestudy`'s own parser, stopped before it does anything."""

    class Parser(command_line.OneLineParser):
        def parse_args(self, args=None, namespace=None):
            raise Parsed(super().parse_args(args, namespace))

    monkeypatch.setattr(command_line, "OneLineParser", Parser)
    try:
        command_line.main(words)
    except SystemExit:
        return ["python -m scalestudy's parser refuses it"]
    except Parsed as parsed:
        profile = getattr(parsed.args[0], "profile", None)
        return profile_problems(str(profile)) if profile else []
    return ["it ran instead of being parsed"]


def path_problems(words: list[str]) -> list[str]:
    return [
        f"{word}: no such file in the repository"
        for word in words
        if word.startswith(REPO_PATHS) and not any(REPO.glob(word.rstrip("/")))
    ]


def problems_of(words: list[str], monkeypatch, parser) -> list[str]:
    problems = path_problems(words)
    for i, word in enumerate(words):
        if word == "snakemake":
            problems += snakemake_problems(words[i + 1 :], parser)
        elif word == "-m" and words[i + 1 : i + 2] == ["scalestudy"]:
            problems += scalestudy_problems(words[i + 2 :], monkeypatch)
    return problems


def checked(words: list[str]) -> bool:
    return "snakemake" in words or any(a == "-m" and b == "scalestudy" for a, b in zip(words, words[1:], strict=False))


@pytest.mark.parametrize("block", BASH, ids=where)
def test_every_command_line_names_what_exists(block, monkeypatch, snakemake_parser):
    found = {" ".join(words): problems_of(words, monkeypatch, snakemake_parser) for words in command_lines(block)}
    assert {line: problems for line, problems in found.items() if problems} == {}


# ---------------------------------------------------------------- the checks see mistakes


def test_the_docs_have_examples_of_every_kind():
    kinds = [next(iter(directives(block.note)), "sweep") for block in YAML]
    assert {"sweep", "overlay", "fragment", "cluster"} <= set(kinds), kinds
    assert sum(checked(words) for block in BASH for words in command_lines(block)) >= 15


@pytest.mark.parametrize(
    "line, expected",
    [
        ("snakemake --profile profiles/local report", []),
        ("snakemake --profile profiles/local -- results/lammps-wca/runs.csv", []),
        ("snakemake --profile profiles/nosuch", ["--profile profiles/nosuch: no such profile;"]),
        ("snakemake --profile profiles/local reprot", ["target reprot: neither a rule ("]),
        ("snakemake --profile profiles/local --configfile my.yaml report", ["--configfile report: a target, read"]),
        ("snakemake --profile profiles/local -- results/nosuch/runs.csv", ["target results/nosuch/runs.csv: no study"]),
        ("snakemake --nosuch-option", ["Snakemake's parser refuses it"]),
        ("python -m scalestudy plan --profile profiles/gadi", []),
        ("python -m scalestudy pln --profile profiles/gadi", ["python -m scalestudy's parser refuses it"]),
        ("python -m scalestudy plan --profile profiles/gaddi", ["--profile profiles/gaddi: no such profile;"]),
        ("python benchmarks/nosuch.py", ["benchmarks/nosuch.py: no such file in the repository"]),
    ],
)
def test_a_command_line_naming_what_does_not_exist_is_found(line, expected, monkeypatch, snakemake_parser, capsys):
    problems = problems_of(shlex.split(line), monkeypatch, snakemake_parser)
    assert len(problems) == len(expected), problems
    assert all(p.startswith(e) for p, e in zip(problems, expected, strict=True)), problems


def test_a_yaml_example_that_breaks_fails_and_an_error_example_must_fail(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(
        "```yaml\nstudies: {pp: {app: pingpong, nodes: [1], ranks_per_node: [2], repeat: 3}}\n```\n\n"
        "<!-- example: error -->\n```yaml\nstudies: {pp: {app: pingpong, nodes: [1], ranks_per_node: [2]}}\n```\n\n"
        "<!-- example: fragment of studies.collectives -->\n```yaml\nexclude: [{backend: nccl}]\n```\n"
    )
    monkeypatch.setattr(docs, "REPO", tmp_path)
    typo, not_an_error, fragment = docs.blocks(page)
    with pytest.raises(SweepError, match="unknown key 'repeat'"):
        load_example(typo, tmp_path, monkeypatch)
    assert load_example(not_an_error, tmp_path, monkeypatch).points  # so `error` would fail the test
    with pytest.raises(SweepError, match=r"studies\.collectives\.exclude\[0\]\.backend: unknown value 'nccl'"):
        load_example(fragment, tmp_path, monkeypatch)
