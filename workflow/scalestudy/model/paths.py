"""Where everything is: the checkout's own files, and the layout of a results directory.

Every path of the results layout is computed here, and nowhere else: the rules (which
call these functions with wildcards, e.g. ``layout.run_dir("{study}", "{point}")``), the
apps, the runner, the analysis and the report; under the assets, the app that makes a file
names it (apps.hoomd.state_file: HOOMD-blue's initial states; apps.litgpt.assets.tiny_folder: the
files of the LitGPT stand-in). A results directory may be anywhere
(`results_dir:`, e.g. /scratch on Gadi).

    <results>/<study>/runs/<point id>/{metrics.json, stdout.log, launch.sh, batch.log, attempts/, history/}
    <results>/<study>/runs/<point id>/history/<tag>/{metrics.json, stdout.log, ..., definition.json}
    <results>/<study>/{runs,scaling,variants}.csv, logs/<step>.log
    <results>/assets/...          inputs the workflow makes (stand-in model, initial states)
    <results>/report/{index.html, index.md, report.log, plots/<study>.<kind>.png, provenance/<study>.jsonl}
    <results>/compare/{index.html, index.md, compare.csv, ratios.png, compare.log}   (the compare target)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
# The folder put on PYTHONPATH so that `import scalestudy` works in every job.
WORKFLOW_DIR = PACKAGE_ROOT.parent
REPO_ROOT = WORKFLOW_DIR.parent
SCHEMA_PATH = REPO_ROOT / "config" / "schema" / "sweep.schema.yaml"
# The sweep the Snakefile reads unless a --configfile (or a profile's configfiles) replaces it.
DEFAULT_SWEEP = "config/sweep.yaml"


def user_cache_dir() -> Path:
    """Where planning keeps what is costly to work out and the same for every sweep (counts of
    what a model's training step holds): $XDG_CACHE_HOME/scalestudy, else ~/.cache/scalestudy."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scalestudy"


# Site files may live outside the checkout (e.g. private project codes): this variable names their folder.
CLUSTERS_DIR_ENV = "SCALESTUDY_CLUSTERS_DIR"


def folder_problem(path: str | Path) -> str | None:
    """Why `path` cannot be a folder to write into (results_dir, --out): it is a file, or lies
    under one (its parents are made where missing); None when it can."""
    path = Path(path)
    for place in (path, *path.parents):
        if place.exists():
            if place.is_dir():
                return None
            return "is a file, not a folder" if place == path else f"lies under {place}, which is a file"
    return None


def clusters_dir() -> Path:
    """The folder of the cluster files: $SCALESTUDY_CLUSTERS_DIR, else the checkout's config/clusters."""
    return Path(os.environ.get(CLUSTERS_DIR_ENV) or REPO_ROOT / "config" / "clusters")


def cluster_file(name: str) -> str:
    """The cluster file `name` as messages name it: relative to the checkout (config/clusters/x.yaml)
    where it is the checkout's, else the site's own path ($SCALESTUDY_CLUSTERS_DIR)."""
    path = clusters_dir() / f"{name}.yaml"
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


# Files of a run directory.
METRICS = "metrics.json"
STDOUT = "stdout.log"
LAUNCH_SCRIPT = "launch.sh"
BATCH_LOG = "batch.log"  # the batch job's own output (-o): where Gadi writes its usage block
# The node file a point's launcher reads where PBS listed its hosts fewer times than its ranks per node.
PBS_NODEFILE_COPY = "pbs_nodefile"
ATTEMPTS = "attempts"  # earlier failed attempts of a retried point
# Earlier records of a point whose definition changed (or that Snakemake reran), one folder
# each, with the definition they measured (DEFINITION_FILE).
HISTORY = "history"
DEFINITION_FILE = "definition.json"
KEEP_LOG = "keep.log"
RUNS_SEGMENT = "runs"
# The plots every study gets (<results>/report/plots/<study>.<kind>.png). Here, not in
# plots.py, so that planning a DAG never imports matplotlib.
# `sizes`: latency and bandwidth against message size (apps whose figures are such curves);
# `models`: each curve's scaling model and its band of predictions (scalestudy.analysis.scaling_models).
PLOT_KINDS = ("metric", "speedup", "efficiency", "variants", "cost", "breakdown", "sizes", "models")
LOCK_NAME = ".scalestudy.lock"
# A comparison of two studies' results: the page, its Markdown twin, the table, the ratios' plot.
COMPARE_FILES = {"html": "index.html", "markdown": "index.md", "csv": "compare.csv", "plot": "ratios.png"}


@dataclass(frozen=True)
class Layout:
    """The layout of one results directory. Arguments may be wildcards ("{study}") for rules."""

    results: str = "results"

    @property
    def assets(self) -> str:
        """Inputs the workflow's own rules make; a path under here is a DAG edge, not a check."""
        return f"{self.results}/assets"

    def run_dir(self, study: str, point: str) -> str:
        return f"{self.results}/{study}/{RUNS_SEGMENT}/{point}"

    def metrics(self, study: str, point: str) -> str:
        return f"{self.run_dir(study, point)}/{METRICS}"

    def stdout(self, study: str, point: str) -> str:
        return f"{self.run_dir(study, point)}/{STDOUT}"

    def history(self, study: str, point: str) -> str:
        return f"{self.run_dir(study, point)}/{HISTORY}"

    def kept(self, study: str, point: str, tag: str, name: str = DEFINITION_FILE) -> str:
        """A file of history/<tag>/, where an earlier record of the point is kept when it is
        superseded (`bookkeeping.history`): by default its note (definition.json), written last,
        which says that the folder is whole."""
        return f"{self.history(study, point)}/{tag}/{name}"

    def table(self, study: str, name: str) -> str:
        return f"{self.results}/{study}/{name}.csv"

    def study_log(self, study: str, step: str) -> str:
        return f"{self.results}/{study}/logs/{step}.log"

    def ladder_file(self, study: str) -> str:
        """What a study's node ladders did (planning.tables.ladder_state): the report's section."""
        return f"{self.results}/{study}/ladder.json"

    def round_file(self, study: str, round_number: str | int) -> str:
        """What a round of a study's repeats-until-clear decided (bookkeeping.repeats.next_round):
        the points of the next round, none when every point has stopped."""
        return f"{self.results}/{study}/rounds/round-{round_number}.json"

    @property
    def report_dir(self) -> str:
        return f"{self.results}/report"

    @property
    def report_html(self) -> str:
        return f"{self.report_dir}/index.html"

    @property
    def report_markdown(self) -> str:
        return f"{self.report_dir}/index.md"

    @property
    def report_log(self) -> str:
        return f"{self.report_dir}/report.log"

    def plot(self, study: str, kind: str) -> str:
        return f"{self.report_dir}/plots/{study}.{kind}.png"

    def provenance(self, study: str) -> str:
        """Every run's provenance, one JSON line per run: the report page links to it (a
        10,000-run study's would make the page tens of MB)."""
        return f"{self.report_dir}/provenance/{study}.jsonl"

    @property
    def compare_dir(self) -> str:
        """`snakemake ... compare`: this results directory against a baseline."""
        return f"{self.results}/compare"

    @property
    def compare_log(self) -> str:
        return f"{self.compare_dir}/compare.log"

    @property
    def lock(self) -> str:
        return f"{self.results}/{LOCK_NAME}"


def compare_outputs(folder: str | Path) -> dict[str, str]:
    """What `python -m scalestudy compare --out FOLDER` (and the compare rule) writes."""
    return {name: f"{folder}/{file}" for name, file in COMPARE_FILES.items()}


def study_and_point(metrics_path: str | Path) -> dict[str, str]:
    """<results>/<study>/runs/<point id>/metrics.json -> its study and point id ({} elsewhere)."""
    parts = Path(metrics_path).parts
    if RUNS_SEGMENT not in parts:
        return {}
    at = len(parts) - 1 - parts[::-1].index(RUNS_SEGMENT)
    return {"study": parts[at - 1], "point": "/".join(parts[at + 1 : -1])}
