"""Real 2-rank runs with a binding: mpirun (Open MPI) and Hydra (MPICH, LAMMPS) place the
ranks, the rank probe records the CPUs each got, and the settings proof judges them."""

import os
import subprocess
import sys

import pandas as pd
import pytest
from points import md_config, pingpong_point
from scalestudy.analysis.records import write_runs_table
from scalestudy.analysis.scaling import write_scaling_table
from scalestudy.analysis.verdicts import write_variants_table
from scalestudy.config import clusters, study
from scalestudy.launch.runner import run_point
from scalestudy.model.paths import Layout, compare_outputs
from scalestudy.model.rank_probe import parse_cpu_list

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="binding 2 ranks to cores needs 2 CPUs")


def ranks_of(metrics):
    return metrics["provenance"]["ranks"]


def test_open_mpi_binding_core_gives_each_rank_its_own_cpu_and_is_proven(tmp_path):
    metrics = run_point(pingpong_point(binding="core"), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    assert "--bind-to core" in (tmp_path / "run" / "launch.sh").read_text()
    ranks = ranks_of(metrics)
    cpus = [parse_cpu_list(r["cpus"]) for r in ranks]
    assert [len(c) for c in cpus] == [1, 1] and not cpus[0] & cpus[1]
    assert all(r["cores"] == 1 and len(parse_cpu_list(r["launcher_cpus"])) >= 2 for r in ranks)
    proof = metrics["settings_proof"]
    assert proof["verified"] is True, proof["problems"]
    assert proof["bindings"] == " ".join(f"{r['rank']}@{r['host']}:{r['cpus']}" for r in ranks)


def test_open_mpi_binding_none_leaves_each_rank_every_cpu(tmp_path):
    metrics = run_point(pingpong_point(binding="none"), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    assert all(r["cpus"] == r["launcher_cpus"] for r in ranks_of(metrics))
    assert metrics["settings_proof"]["verified"] is True


def test_hydra_binding_core_is_recorded_per_rank_for_lammps(tmp_path, repo):
    if not (repo / ".venv-lammps/bin/lmp").exists():
        pytest.skip("no LAMMPS venv (scripts/setup.sh makes .venv-lammps)")
    config = md_config(N=500, warmup_steps=10, benchmark_steps=50, executable=".venv-lammps/bin/lmp")
    config.update(cluster="local")
    config["studies"]["md"].update(nodes=[1], ranks_per_node=[2], binding=["core"])
    (point,) = study.load(config).points
    metrics = run_point(point, tmp_path / "run", clusters.load("local"), layout=Layout(str(tmp_path)))
    assert metrics["status"] == "ok", metrics["reason"]
    assert "-bind-to core" in (tmp_path / "run" / "launch.sh").read_text()
    assert [len(parse_cpu_list(r["cpus"])) for r in ranks_of(metrics)] == [1, 1]
    assert metrics["settings_proof"]["verified"] is True, metrics["settings_proof"]["problems"]


def test_open_mpi_takes_hardware_threads_as_slots(tmp_path):
    # The study loader refuses hyperthreads where the cluster file has no SMT; the launch
    # line itself (--use-hwthread-cpus, bound to one hardware thread each) runs anywhere.
    metrics = run_point(pingpong_point(hyperthreads=True, binding="hwthread"), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    assert "--use-hwthread-cpus" in (tmp_path / "run" / "launch.sh").read_text()
    assert [len(parse_cpu_list(r["cpus"])) for r in ranks_of(metrics)] == [1, 1]
    assert metrics["settings_proof"]["verified"] is True, metrics["settings_proof"]["problems"]


def test_a_placement_study_compared_with_itself_pairs_each_binding_with_itself(tmp_path, repo):
    # Real runs bound to cores and unbound, two repeats each, compared by the command line:
    # every pair is one binding on both sides, so nothing is faster or slower than itself.
    layout, expected = Layout(str(tmp_path / "results")), []
    for binding in ("core", "none"):
        for repeat in (1, 2):
            point = pingpong_point(binding=binding, repeat=repeat)
            run_dir = layout.run_dir(point.study, point.id)
            assert run_point(point, run_dir, clusters.load("local"), layout=layout)["status"] == "ok"
            expected.append((point.as_record(), layout.metrics(point.study, point.id)))
    study_name = expected[0][0]["study"]
    write_runs_table(expected, layout.table(study_name, "runs"))
    table, runs = write_scaling_table(layout.table(study_name, "runs"), layout.table(study_name, "scaling"))
    write_variants_table(table, runs, layout.table(study_name, "variants"))
    out = tmp_path / "compare"
    command = [sys.executable, "-m", "scalestudy", "compare", layout.results, layout.results, "--out", out]
    # The package under test, whichever checkout an installed one points at.
    env = {**os.environ, "PYTHONPATH": str(repo / "workflow")}
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    table = pd.read_csv(compare_outputs(out)["csv"])
    both = table[table["present"] == "both"]
    assert set(both["binding"]) == {"core", "none"} and len(both) == len(table)
    # Runs measured while others held their CPUs hold the verdict back, saying so.
    assert set(both["statistical_verdict"]) == {"no measurable difference"}
    assert both["verdict"].map(lambda v: v == "no measurable difference" or v.startswith("contended")).all()
    assert (both["ratio"] == 1).all()
