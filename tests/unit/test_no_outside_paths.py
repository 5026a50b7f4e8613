"""Nothing the repository holds sends a contributor outside it: no doc, test, script, profile,
config or module names a path of the machine it was written on (a folder beside the checkout,
the work folder, root's or a real user's home). What the tests need of the machine they set up
with the project's own scripts (tests/support/openpbs/setup.sh for OpenPBS).

Recorded outputs of real runs (tests/data/) keep the paths those runs had: they are what a
program printed, not where a contributor is sent."""

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What a contributor's clone holds: every folder but the recordings and results (and, below,
# the made environments and caches, which git does not track).
SKIPPED_DIRS = {"tests/data", "results"}
TEXT_SUFFIXES = {".py", ".md", ".sh", ".smk", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".json", ".in", ".rst", ""}
# Home folders an example may name: placeholders, no account of any machine.
EXAMPLE_HOMES = ("u", "me", "you")
OUTSIDE = re.compile(
    r"\.\./shared\b"  # the folder beside the checkout on the machine it was written on
    r"|(?<![\w.$}-])/work/"  # that machine's work folder
    r"|(?<![\w.$}-])/root/"  # root's home
    r"|(?<![\w.$}-])/opt/src\b"  # where that machine's sources were built
    rf"|(?<![\w.$}}-])/home/(?!(?:{'|'.join(EXAMPLE_HOMES)})\b)[A-Za-z_][\w.-]*"  # a real user's home
)


def skipped(folder: Path) -> bool:
    """.git, .venv*, .snakemake, caches, and SKIPPED_DIRS (.ci is the project's)."""
    name = folder.name
    if name.startswith(".") and name != ".ci" or name == "__pycache__" or name.endswith(".egg-info"):
        return True
    return folder.relative_to(REPO).as_posix() in SKIPPED_DIRS


def repository_text_files() -> list[Path]:
    files = []
    for folder, subfolders, names in os.walk(REPO):
        subfolders[:] = [name for name in subfolders if not skipped(Path(folder) / name)]
        files += [Path(folder) / name for name in names if Path(name).suffix in TEXT_SUFFIXES and name != ".git"]
    # This test names what it looks for.
    return sorted(path for path in files if path != Path(__file__).resolve())


def outside_paths(text: str) -> list[tuple[int, str]]:
    lines = enumerate(text.splitlines(), 1)
    return [(number, match.group(0)) for number, line in lines for match in OUTSIDE.finditer(line)]


def test_the_pattern_finds_what_it_is_for_and_passes_what_is_fine():
    found = outside_paths(
        "see ../shared/openpbs/setup-openpbs.sh\n/work/main/.venv/bin/mpirun\nPATH=/root/.pyenv/shims\n"
        "LOGS=/opt/src/logs\njobdir = /home/scaleuser\n"
    )
    assert [match for _, match in found] == ["../shared", "/work/", "/root/", "/opt/src", "/home/scaleuser"]
    fine = "~/.cache/scalestudy /home/me/bench/in.lj {results}/work/x https://example.org/work/ /scratch/ab12/you"
    assert outside_paths(fine) == []


def test_no_file_of_the_repository_names_a_path_outside_it():
    files = repository_text_files()
    assert REPO / "docs/profiles.md" in files and REPO / "tests/support/openpbs/setup.sh" in files
    assert not any(path.is_relative_to(REPO / "tests/data") for path in files)
    found = [
        f"{path.relative_to(REPO)}:{number}: {match}"
        for path in files
        for number, match in outside_paths(path.read_text(errors="replace"))
    ]
    assert found == [], "paths outside the repository (a clone has none of them):\n" + "\n".join(found)
