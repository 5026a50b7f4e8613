"""Adding a scheduler is one module, one cluster file and one profile (docs/ARCHITECTURE.md,
"A scheduler"): in a copy of the checkout, a module scheduler/lsf.py (an LSF backend: its
bsub line, a refusal of its own), config/clusters/lsf.yaml and profiles/lsf/ alone give a
study that plans (`python -m scalestudy plan`: its bsub lines), dry-runs (`snakemake -n`)
and is priced (the cost forecast) through it; nothing else of the checkout is edited."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from test_new_app import not_copied

REPO = Path(__file__).resolve().parents[2]

LSF_BACKEND = '''
"""IBM Spectrum LSF (a test backend): a point is one bsub job of ncpus slots."""

from .interface import Scheduler


class Lsf(Scheduler):
    scheduler = "lsf"

    def problems(self, point, request):
        """This site's LSF runs one host per job."""
        if request.nodes > 1:
            return [f"studies.{point.study}.nodes: {request.nodes} hosts, but this LSF runs one; use nodes: [1]"]
        return []

    def submit_line(self, request, *, log_path, jobscript):
        """bsub: slots, queue, minutes of walltime, memory per host in MB."""
        return ["bsub", "-q", request.queue.submit_name, "-n", str(request.ncpus),
                "-W", str(-(-request.walltime_s // 60)), "-M", f"{request.mem_per_node_gib * 1024}MB",
                "-J", request.name, "-o", log_path, jobscript]
'''

CLUSTER = {
    "name": "lsf",
    "scheduler": "lsf",
    "cores_per_node": 8,
    "mem_per_node_gib": 32,
    "charge_rate": None,
    "default_queue": "normal",
    "walltime_margin": "00:01:00",
    "queues": {"normal": {"cores_per_node": 8, "mem_per_node_gib": 32, "charge_rate": 2.0}},
    "mpi": {"flavour": "openmpi", "launcher": "mpirun", "source": "site"},
}

PROFILE = {
    "executor": "cluster-generic",
    "jobs": 10,
    "config": ["cluster=lsf"],
    "cluster-generic-submit-cmd": "bsub",
    "group-components": ["pack=100000"],
    "resources": ["measurement_slot=1"],
    "set-resource-scopes": ["measurement_slot=local"],
}


def study(nodes: list[int]) -> dict:
    return {
        "cluster": "lsf",
        "studies": {"pp": {"app": "pingpong", "nodes": nodes, "ranks_per_node": [2, 4], "repeats": 2,
                           "walltime": "00:09:00", "params": {"max_bytes": 4096}}},
    }  # fmt: skip


def run(checkout: Path, *argv: str) -> subprocess.CompletedProcess:
    """`python *argv` in the copy, its package first on the path (as the Snakefile puts it)."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "workflow")}
    return subprocess.run([sys.executable, *argv], cwd=checkout, env=env, capture_output=True, text=True, timeout=300)


def test_a_new_scheduler_is_one_module_one_cluster_file_and_one_profile(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=not_copied)
    (checkout / "workflow/scalestudy/scheduler/lsf.py").write_text(LSF_BACKEND)
    (checkout / "config/clusters/lsf.yaml").write_text(yaml.safe_dump(CLUSTER))
    (checkout / "profiles/lsf").mkdir()
    (checkout / "profiles/lsf/config.v8+.yaml").write_text(yaml.safe_dump(PROFILE))
    (tmp_path / "pp.yaml").write_text(yaml.safe_dump(study([1])))
    sweep = ["--configfile", str(tmp_path / "pp.yaml")]

    # Planned: each point's bsub line (4 points x 2 repeats), after the cost of the sweep.
    planned = run(checkout, "-m", "scalestudy", "plan", "--profile", "profiles/lsf", *sweep)
    assert planned.returncode == 0, planned.stderr[-3000:]
    bsub = [line for line in planned.stdout.splitlines() if line.startswith("bsub ")]
    assert len(bsub) == 4
    # 2 ranks: 2 slots, 4 ranks: 4; 9 min + the 1 min margin; 4 GiB per slot of a 32 GiB, 8-core node.
    assert {line.split(" -J ")[0] for line in bsub} == {
        "bsub -q normal -n 2 -W 10 -M 8192MB", "bsub -q normal -n 4 -W 10 -M 16384MB"}  # fmt: skip
    # Priced at the queue's rate: 2 SU per core-hour x (2 + 4) cores x 2 repeats x 10 min = 4 SU.
    forecast = next(line for line in planned.stdout.splitlines() if "cost forecast" in line)
    assert "4.0 SU" in forecast, forecast

    # Dry-run through the profile: the run jobs, the same forecast before any job.
    dry = run(checkout, "-m", "snakemake", "-n", "--profile", "profiles/lsf", *sweep)
    assert dry.returncode == 0, dry.stderr[-3000:]
    said = dry.stdout + dry.stderr
    assert "cost forecast for the 4 run jobs to submit on lsf" in said and "total 4.0 SU" in said, said[-3000:]
    assert "run_pingpong" in said

    # The backend's own refusal stops the study at load, one line naming the key.
    (tmp_path / "pp.yaml").write_text(yaml.safe_dump(study([1, 2])))
    refused = run(checkout, "-m", "snakemake", "-n", "--profile", "profiles/lsf", *sweep)
    assert refused.returncode != 0
    assert "sweep error: studies.pp.nodes: 2 hosts, but this LSF runs one; use nodes: [1]" in refused.stderr
