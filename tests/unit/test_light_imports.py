"""The runner, the status command and planning load no app's heavy library: a run job starts in
an environment holding only its app's packages (apps/<pkg>/env.yaml: no torch where the
app is LAMMPS), and pays no import it does not use. Heavy packages are imported inside the functions
that need them, except in the rank-only modules (apps.registry.RANK_ONLY, loaded inside a rank) and the
report side (the analysis and what presents it: rules that run in the workflow's own
environment, which holds numpy, pandas and matplotlib)."""

import ast
from pathlib import Path

from scalestudy.apps.registry import RANK_ONLY

PACKAGE = Path(__file__).resolve().parents[2] / "workflow/scalestudy"
HEAVY = {"torch", "lightning", "litgpt", "hoomd", "gsd", "lammps", "mpi4py", "numpy", "pandas", "scipy", "matplotlib"}
REPORT_SIDE = {"analysis", "presentation"}  # the rules and commands import them inside


def rank_only(module: str) -> bool:
    """A module under apps/ (its path, without .py) that is RANK_ONLY or inside a RANK_ONLY package."""
    return any(module == name or module.startswith(name + "/") for name in RANK_ONLY)


def checked_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if (
            parts[0] in REPORT_SIDE
            or "/".join(parts) in REPORT_SIDE
            or (parts[0] == "apps" and rank_only("/".join(parts[1:])))
        ):
            continue
        yield path


def top_level_imports(tree: ast.Module):
    """Imports run when the module loads: at its top, or in an if/try block there (not in a def or class body)."""
    pending = list(reversed(tree.body))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.lineno, node.module or ""
        elif isinstance(node, ast.If | ast.Try | ast.With):
            pending.extend(reversed(list(ast.iter_child_nodes(node))))


def test_no_module_outside_the_ranks_and_the_report_imports_a_heavy_package_at_its_top():
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {name}"
        for path in checked_modules()
        for line, name in top_level_imports(ast.parse(path.read_text()))
        if name.split(".")[0] in HEAVY
    ]
    assert not found, found


def test_the_check_sees_a_heavy_import_at_the_top_and_not_inside_a_function():
    tree = ast.parse("import os\ntry:\n    import torch\nexcept ImportError:\n    pass\ndef f():\n    import numpy\n")
    assert [name for _, name in top_level_imports(tree)] == ["os", "torch"]


def test_the_rank_only_modules_are_the_ones_that_exist():
    """RANK_ONLY names modules by path: a module moved away would leave a name exempting nothing,
    and its heavy imports held to nothing either."""
    apps = PACKAGE / "apps"
    for name in RANK_ONLY:
        assert (apps / f"{name}.py").is_file() or (apps / name / "__init__.py").is_file(), name
    exempt = [path for path in sorted(PACKAGE.rglob("*.py")) if path not in set(checked_modules())]
    assert PACKAGE / "apps/torch_parallel/rank/models.py" in exempt
    assert PACKAGE / "apps/torch_parallel/app.py" not in exempt and PACKAGE / "apps/registry.py" not in exempt
