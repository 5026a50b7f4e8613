"""What Snakemake itself says about a bad sweep, before any job: real snakemake invocations."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def snakemake(workdir: Path, overlay: dict | str, *args: str, profile: str | None = None):
    """The shipped local study with an overlay (a dict, or a file's text as written), through
    `--profile profiles/<profile>` or on one core."""
    (workdir / "overlay.yaml").write_text(overlay if isinstance(overlay, str) else yaml.safe_dump(overlay))
    how = ["--profile", str(REPO / "profiles" / profile)] if profile else ["--cores", "1"]
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               *how, *args, "--configfile", str(REPO / "config/sweep.yaml"),
               str(REPO / "config/local.yaml"), str(workdir / "overlay.yaml")]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)


# What the shipped sweep says at every load: HOOMD-blue's memory is not predicted (apps.hoomd).
UNPREDICTED = "memory per rank not predicted"


def sweep_lines(result: subprocess.CompletedProcess) -> list[str]:
    """The sweep's error and warning lines, less the shipped sweep's own (UNPREDICTED)."""
    return [line for line in result.stderr.splitlines() if line.startswith("sweep ") and UNPREDICTED not in line]


def test_unknown_flag_set_stops_everything_with_one_line(tmp_path):
    result = snakemake(tmp_path, {"studies": {"litgpt-full": {"mpi_flags": ["nosuch"]}}}, "-n")
    assert result.returncode != 0
    assert sweep_lines(result) == [
        "sweep error: studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch';"
        " defined: allreduce-recursive-doubling, allreduce-ring, default, mpich-nolocal, no-ucx-hcoll"
    ]
    assert not (tmp_path / "results").exists()


def test_missing_data_warns_in_a_dry_run_and_stops_a_real_run(tmp_path):
    overlay = {"studies": {"litgpt-lora": {"params": {"data_path": str(tmp_path / "no-such.json")}}}}
    dry = snakemake(tmp_path, overlay, "-n")
    assert dry.returncode == 0, dry.stderr[-2000:]
    expected = f"studies.litgpt-lora.params.data_path: {tmp_path / 'no-such.json'} does not exist"
    assert sweep_lines(dry) == [f"sweep warning: {expected} (a real run stops here)"]
    assert "run_litgpt" in dry.stdout
    real = snakemake(tmp_path, overlay)
    assert real.returncode != 0
    assert f"sweep error: {expected}" in sweep_lines(real)
    assert not list(tmp_path.glob("results/*/runs"))  # no point ran, not even the other study's


def profile_dry_run(
    workdir: Path, profile: str, *configfiles: str, project: str | None = "ab12", targets: tuple[str, ...] = ()
):
    """A dry run through a shipped profile; PBS sites charge a project ($PROJECT, set on Gadi's login nodes)."""
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               *targets, "--profile", str(REPO / "profiles" / profile), "-n",
               "--config", f"cluster={profile}", f"results_dir={workdir / 'results'}"]  # fmt: skip
    if configfiles:
        command += ["--configfile", *configfiles]
    env = {key: value for key, value in os.environ.items() if key != "PROJECT"}
    env.update({"PROJECT": project} if project else {})
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


def test_pbs_profiles_list_one_job_per_point_of_the_shipped_sweep(tmp_path):
    for profile in ("gadi", "aspire2a"):
        dry = profile_dry_run(tmp_path, profile)
        assert dry.returncode == 0, dry.stderr[-2000:]
        # 2 studies x 2 node counts x 2 MPI sets x 2 NCCL sets, 1 repeat
        assert re.search(r"^run_litgpt\s+16$", dry.stdout, re.M), dry.stdout[-2000:]
        # HOOMD strong 3 nodes x 2 sets x 3 repeats + weak 3 x 3; LAMMPS 3 x 2 x 3
        assert re.search(r"^run_hoomd\s+27$", dry.stdout, re.M), dry.stdout[-2000:]
        assert re.search(r"^run_lammps\s+18$", dry.stdout, re.M), dry.stdout[-2000:]


def test_a_sweep_the_site_would_reject_stops_before_submission(tmp_path):
    (tmp_path / "overlay.yaml").write_text(
        yaml.safe_dump({"studies": {"pp": {"app": "pingpong", "nodes": [1, 2], "ranks_per_node": [36]}}})
    )
    sweep, v100 = str(REPO / "config/sweep.yaml"), str(REPO / "config/v100.yaml")
    dry = profile_dry_run(tmp_path, "gadi", sweep, v100, str(tmp_path / "overlay.yaml"))
    assert dry.returncode != 0
    assert sweep_lines(dry) == [
        "sweep error: studies.pp: ncpus=72 at nodes=2, ranks_per_node=36 is not a multiple of 48; "
        "Gadi normal jobs past one node take whole nodes (ranks_per_node x threads_per_rank = 48)"
    ]


def test_dry_mode_prints_the_exact_qsub_line_of_every_point(tmp_path):
    def dry_mode(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", *command, "plan", "--profile", "profiles/gadi"],
            capture_output=True, text=True, timeout=120, cwd=REPO,
            env={**os.environ, "PROJECT": "ab12", "PYTHONPATH": str(REPO / "workflow")},
            check=True,
        )  # fmt: skip

    plan = dry_mode("scalestudy")
    # The PBS command line's spelling hands over to it.
    assert dry_mode("scalestudy.scheduler.pbs").stdout == plan.stdout
    forecast, *lines = plan.stdout.splitlines()
    # The sweep's cost forecast first, as a shell comment (the output stays a script).
    assert (
        forecast.startswith("# scalestudy: cost forecast for the sweep (151 points) on gadi")
        and "16,122.0 SU" in forecast
    )
    # LitGPT 2 x 8, HOOMD strong 18 and weak 9, LAMMPS 18 (nodes x flag sets x repeats),
    # torch-parallel 72 (3 models x 4 strategies x 2 nodes x 3 repeats), collectives 18 (36 less
    # the allreduce algorithms' sets with gloo or alltoall, which the study excludes).
    assert len(lines) == 16 + 18 + 9 + 18 + 72 + 18
    assert lines[0] == (
        "qsub -P ab12 -q gpuvolta -l ncpus=48,ngpus=4,mem=382GB,walltime=01:05:00,jobfs=10GB,"
        "storage=scratch/ab12+gdata/ab12 -N litgpt-full.n1g4.d.d.r1 -j oe "
        "-o results/litgpt-full/runs/nodes1-gpn4/mpi-default/nccl-default/rep1/batch.log '<jobscript>'"
    )


def test_a_pbs_dry_run_without_a_project_says_so_at_once(tmp_path):
    dry = profile_dry_run(tmp_path, "gadi", project=None)
    assert dry.returncode != 0
    assert sweep_lines(dry) == [
        "sweep error: config/clusters/gadi.yaml project: not set and $PROJECT is empty; gadi charges every job "
        "to a project (qsub -P): export PROJECT=<your project code> or set project: in that file"
    ]


def test_a_misspelt_key_and_a_key_given_twice_stop_before_any_job(tmp_path):
    overlay = (
        f"clsuter: gadi\nresults_dir: {tmp_path / 'results'}\nstudies:\n  lammps-wca:\n    repeats: 3\n    repeats: 5\n"
    )
    dry = snakemake(tmp_path, overlay, "-n", profile="local")
    assert dry.returncode != 0
    assert sweep_lines(dry) == [
        # The file as named from the working directory (the one snakemake runs in, or --directory).
        "sweep error: overlay.yaml:6: studies.lammps-wca.repeats is given twice (first at line 5); "
        "YAML would keep only the last: remove one"
    ]
    dry = snakemake(tmp_path, overlay.replace("    repeats: 5\n", ""), "-n", profile="local")
    assert sweep_lines(dry) == [
        "sweep error: top level: unknown key 'clsuter'; did you mean 'cluster'? allowed: cluster, results_dir, "
        "retry_failed, budget_su_total, order_seed, partial, predict_from, compare_baseline, assets, mpi_flag_sets, "
        "nccl_env_sets, studies"
    ]


def test_the_local_profile_refuses_what_this_machine_cannot_run(tmp_path):
    overlay = {"results_dir": str(tmp_path / "results"), "studies": {"lammps-wca": {"nodes": [2]}}}
    real = snakemake(tmp_path, overlay, profile="local")
    assert real.returncode != 0
    assert sweep_lines(real) == [
        "sweep error: studies.lammps-wca.nodes: 2 nodes, but local is one machine "
        "(config/clusters/local.yaml nodes: 1); use nodes: [1]"
    ]
    assert not (tmp_path / "results").exists()


def test_a_yaml_mistake_in_the_default_sweep_names_its_file_and_line(tmp_path):
    """Without --configfile the Snakefile reads config/sweep.yaml; Snakemake's own message for
    a YAML mistake names neither the file nor the line."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config/sweep.yaml").write_text("studies:\n  pp:\n    app: pingpong\n   nodes: [1]\n")
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
               "--cores", "1", "-n"]  # fmt: skip
    dry = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert dry.returncode != 0
    assert sweep_lines(dry) == [
        "sweep error: config/sweep.yaml:4:4: not valid YAML: expected <block end>, but found "
        "'<block mapping start>' (while parsing a block mapping at line 2)"
    ]


def test_targets_go_before_configfile_as_the_sweep_reference_shows(tmp_path):
    dry = snakemake(
        tmp_path, {"results_dir": str(tmp_path / "results")}, "-n", "report", profile="local"
    )  # `report` before --configfile
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert re.search(r"^report\s+1$", dry.stdout, re.M)
    reference = (REPO / "docs/sweep.md").read_text()
    assert "snakemake --profile profiles/local report --configfile my-sweep.yaml" in reference


def test_a_placement_the_apps_mpi_lacks_stops_everything_with_one_line(tmp_path):
    overlay = {"studies": {"lammps-placement": {"mapping": ["default", "ppr:1:socket"]}}}
    result = snakemake(tmp_path, overlay, "-n")
    assert result.returncode != 0
    assert sweep_lines(result) == [
        "sweep error: studies.lammps-placement.mapping[1]: 'ppr:1:socket': MPICH Hydra has no per-socket rank count; "
        "allowed for mpich: default, core, socket, numa, hwthread, spread, ppr:N:node"
    ]
    assert not (tmp_path / "results").exists()


def test_the_budget_refuses_the_jobs_to_submit_and_never_the_report(tmp_path):
    """budget_su_total is checked where the jobs to submit are known: the default target's dry
    run stops in one line; `report` submits nothing, is not refused and prints no forecast."""
    (tmp_path / "overlay.yaml").write_text(yaml.safe_dump({"budget_su_total": 100}))
    # The gadi profile's own files (its V100 overlay too), then the budget.
    files = (str(REPO / "config/sweep.yaml"), str(REPO / "config/v100.yaml"), str(tmp_path / "overlay.yaml"))
    dry = profile_dry_run(tmp_path, "gadi", *files)
    assert dry.returncode != 0
    (line,) = [line for line in sweep_lines(dry) if line.startswith("sweep error")]
    assert line.startswith(
        "sweep error: budget_su_total: the 151 run jobs to submit may cost up to 16,122.0 SU on gadi"
    )
    report = profile_dry_run(tmp_path, "gadi", *files, targets=("report",))
    assert report.returncode == 0, report.stderr[-2000:]
    assert re.search(r"^report\s+1$", report.stdout, re.M) and "cost forecast" not in report.stdout + report.stderr


def test_mistakes_in_three_studies_are_reported_in_one_pass_before_any_job(tmp_path):
    """A shape mistake, an unknown flag set and a scale this machine lacks, in three studies:
    three lines at once (each the line its mistake gives alone, as the tests above pin)."""
    overlay = {
        "results_dir": str(tmp_path / "results"),
        "studies": {
            "litgpt-full": {"walltime": "25:00"},
            "hoomd-wca": {"mpi_flags": ["nosuch"]},
            "lammps-wca": {"nodes": [2]},
        },
    }
    real = snakemake(tmp_path, overlay, profile="local")
    assert real.returncode != 0
    assert sweep_lines(real) == [
        "sweep error: studies.litgpt-full.walltime: '25:00' is not allowed; use hours:minutes:seconds above zero, "
        'in quotes, e.g. "01:30:00" (minutes and seconds 00-59; YAML reads an unquoted 1:30:00 as the number 5400)',
        "sweep error: studies.hoomd-wca.mpi_flags[0]: unknown set 'nosuch';"
        " defined: allreduce-recursive-doubling, allreduce-ring, default, mpich-nolocal, no-ucx-hcoll",
        "sweep error: studies.lammps-wca.nodes: 2 nodes, but local is one machine "
        "(config/clusters/local.yaml nodes: 1); use nodes: [1]",
    ]
    assert not (tmp_path / "results").exists()


def test_a_node_ladder_dry_runs_on_every_batch_profile_with_its_first_rung_and_its_worst_case(tmp_path):
    # PBS Pro in both dialects (Gadi, ASPIRE 2A) and Slurm: one rung's jobs listed (its repeats one
    # pack), the ladder and its worst case (every rung) printed, and a budget under that worst case
    # refused before anything. Slurm's ladder has intermediate rungs (`intermediate: true`): 12 nodes
    # is a point too, priced.
    study = {"app": "pingpong", "nodes": {"from": 1, "up_to": 8}, "ranks_per_node": [48], "repeats": 2,
             "pack": "scale"}  # fmt: skip
    (tmp_path / "ladder.yaml").write_text(yaml.safe_dump({"studies": {"pp": study}}))
    between = {**study, "nodes": {"from": 1, "up_to": 16, "intermediate": True}}
    (tmp_path / "between.yaml").write_text(yaml.safe_dump({"studies": {"pp": between}}))
    for profile, sweep_file in (("gadi", "ladder.yaml"), ("aspire2a", "ladder.yaml"), ("slurm", "between.yaml")):
        dry = profile_dry_run(tmp_path, profile, str(tmp_path / sweep_file))
        assert dry.returncode == 0, dry.stderr[-2000:]
        assert re.search(r"^run_pingpong\s+2$", dry.stdout, re.M), dry.stdout[-2000:]
        if sweep_file == "ladder.yaml":
            assert "scalestudy: pp: node ladder 1, 2, 4, 8 nodes, stops below efficiency 0.7" in dry.stdout
            assert "and the 6 runs of the ladder rungs above (the worst case: every rung)" in dry.stdout
        else:
            assert "node ladder 1, 2, 4, 8, 16 nodes (12 between, each measured first where cheaper)" in dry.stdout
            assert "worst case, every rung and intermediate rung: " in dry.stdout
            assert "the 10 runs of the ladder rungs above (the worst case: every rung)" in dry.stdout
        assert "scalestudy: packed 2 points into 1 batch jobs (pp.n1r48.pack1)" in dry.stdout
        assert "Group job pp.n1r48.pack1 " in dry.stdout
    budget = tmp_path / "budget.yaml"
    budget.write_text(yaml.safe_dump({"budget_su_total": 1000}))  # the first rung (208 SU) fits, every rung (3,120) not
    refused = profile_dry_run(tmp_path, "gadi", str(tmp_path / "ladder.yaml"), str(budget))
    assert refused.returncode != 0
    assert "budget_su_total: the 2 run jobs to submit and the 6 runs of the ladder rungs above" in refused.stderr
    # Resumed after its first rung (efficiency 1 at 1 node): through PBS the next rung is what a run
    # submits, one pack of 2 nodes; 4 and 8 nodes are not. (Each dialect's qsub line of every rung,
    # packed: tests/unit/test_ladder_packs.py, through `python -m scalestudy plan`'s dry plan.)
    for rep in (1, 2):
        metrics = tmp_path / f"results/pp/runs/nodes1-rpn48/mpi-default/nccl-default/rep{rep}/metrics.json"
        metrics.parent.mkdir(parents=True)
        metrics.write_text(json.dumps({"status": "ok", "figures": {"latency_us": 2.0 + rep / 1000}}))
    dry = profile_dry_run(tmp_path, "aspire2a", str(tmp_path / "ladder.yaml"))
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "now: runs at 2 nodes (1 node: efficiency 1.00" in dry.stdout, dry.stdout[-2000:]
    assert re.search(r"^run_pingpong\s+2$", dry.stdout, re.M), dry.stdout[-2000:]
    assert "Group job pp.n2r48.pack1 " in dry.stdout and "nodes4-" not in dry.stdout
