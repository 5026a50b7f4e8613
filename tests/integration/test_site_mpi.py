"""A site's MPI, for real: Debian's Open MPI 4.1.4 and MPICH 4.0.2 as site modules under Lmod
(tests/support/site_modules.py), and .venv-site/, built under the Open MPI module by the command a
site's user runs (`SCALESTUDY_MPI=site bash scripts/setup.sh`: mpi4py from source against the
module's mpicc, no pip MPI; scripts/test.sh builds it). Cluster files of the tests' own say
`mpi.source: site` and the module to load; the runner loads it, as a login shell would.

- pip's mpi4py under the module's 4.1 mpirun (the issue's wrong MPI) is refused in one line
  naming both sides, before anything is launched; so is Open MPI's mpi4py under MPICH's Hydra;
- the site venv's ranks run on 4.1.4 and each names it (MPI_Get_library_version), the module is
  recorded, and a flag for a component the build lacks (hcoll) is shown not applied;
- through Snakemake and profiles/local, one point of each app that loads MPI through mpi4py
  (ping-pong, collectives, torch-parallel, LitGPT through Lightning's MPI environment, a command
  study of mpi4py.bench) on the module's Open MPI, the report naming the library beside the flag
  set; and a `command` study built for MPICH (`mpi: mpich`) on the MPICH module, with
  .venv-site-mpich/ built under it;
- before any job: an unknown module, and a module that loads no MPI, are one line each;
- `--sdm env-modules` with `app_modules` loads the app's module in its jobs (Snakemake's own
  `module purge && module load`);
- a 2-node point of each of those apps on the two-host bed, launched by the module's mpirun over
  ssh (ORTE's agent), every rank on each host naming the module's library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import site_modules
import yaml
from points import pingpong_point, point

REPO = Path(__file__).resolve().parents[2]
SITE_PYTHON = REPO / ".venv-site" / "bin" / "python"
SITE_MPICH_PYTHON = REPO / ".venv-site-mpich" / "bin" / "python"  # the same, under the MPICH module
PIP_PYTHON = REPO / ".venv" / "bin" / "python"
# What a login shell's PATH holds before any module: no MPI of the project's venvs.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = [
    pytest.mark.skipif(
        not Path(site_modules.LMOD_INIT).is_file(), reason="no Lmod (scripts/system-packages.sh installs lmod)"
    ),
    pytest.mark.skipif(
        site_modules.installed_version("openmpi") is None,
        reason="no Debian Open MPI (scripts/system-packages.sh installs openmpi-bin)",
    ),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> dict:
    """The modulefile tree (openmpi/<v>, mpich/<v>, and tools/1.0, a module that loads no MPI)."""
    root = tmp_path_factory.mktemp("modulefiles")
    names = site_modules.write_tree(root)
    (root / "tools").mkdir()
    (root / "tools" / "1.0.lua").write_text('whatis("tools: no MPI")\nsetenv("SITE_TOOLS", "1")\n')
    return {"root": root, **names}


@pytest.fixture(scope="module")
def site_python() -> Path:
    if not SITE_PYTHON.is_file():
        pytest.skip(".venv-site not built (scripts/test.sh builds it: SCALESTUDY_MPI=site bash scripts/setup.sh)")
    return SITE_PYTHON


@pytest.fixture(scope="module")
def site_mpich_python(tree) -> Path:
    if "mpich" not in tree:
        pytest.skip("no Debian MPICH (scripts/system-packages.sh installs mpich)")
    if not SITE_MPICH_PYTHON.is_file():
        pytest.skip(".venv-site-mpich not built (scripts/test.sh builds it under the MPICH module)")
    return SITE_MPICH_PYTHON


def module_shell(tree: dict, load: list[str] = (), python: Path | None = None) -> dict[str, str]:
    """A login shell's environment on a site: Lmod initialised, the tree on MODULEPATH, `load`
    loaded; the PATH of a shell whose venv (`python`'s) is activated, with no MPI of pip's."""
    env = {"PATH": BASE_PATH, "HOME": os.environ.get("HOME", "/root"), "HF_HUB_OFFLINE": "1"}
    if python is not None:
        env["PATH"] = f"{python.parent}:{BASE_PATH}"
    return site_modules.shell_environment(env, [tree["root"]], load)


def cluster_dir(tmp_path: Path, name: str = "site", **mpi) -> Path:
    """A clusters folder with the local machine as a site: `mpi.source: site` and its modules."""
    data = yaml.safe_load((REPO / "config/clusters/local.yaml").read_text())
    modules = mpi.pop("modules")
    data.update(name=name, modules=modules)
    data["mpi"].update(source="site", **mpi)
    folder = tmp_path / "clusters"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return folder


def run_point(python: Path, point, tmp_path: Path, env: dict[str, str], clusters: Path) -> dict:
    metrics = tmp_path / "run" / "metrics.json"
    env = {**env, "SCALESTUDY_CLUSTERS_DIR": str(clusters), "PYTHONPATH": str(REPO / "workflow")}
    command = [str(python), "-m", "scalestudy", "run-point", "--point", point.to_json(), "--walltime-s", "120",
               "--cluster", "site", "--metrics", str(metrics)]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert metrics.is_file(), done.stderr[-3000:]
    return json.loads(metrics.read_text())


def test_pips_mpi4py_under_the_site_modules_mpirun_is_refused_in_one_line(tree, tmp_path):
    """The issue's wrong MPI: the module's 4.1 mpirun would launch ranks whose mpi4py wheel loads
    pip's Open MPI 5. Refused before the launch, naming both sides; nothing ran."""
    env = module_shell(tree, python=PIP_PYTHON)  # the runner loads the cluster file's module itself
    metrics = run_point(
        PIP_PYTHON, pingpong_point(study="pp"), tmp_path, env, cluster_dir(tmp_path, modules=[tree["openmpi"]])
    )
    assert metrics["status"] == "failed" and metrics["category"] == "mpi_mismatch", metrics["reason"]
    reason = metrics["reason"]
    assert "\n" not in reason and "Open MPI v5" in reason and "(Open MPI) 4.1" in reason, reason
    assert "SCALESTUDY_MPI=site" in reason
    assert reason.endswith("; once fixed, rerun the failed points with --config retry_failed=true")
    assert metrics["provenance"]["modules"] == [tree["openmpi"]]
    log = (tmp_path / "run" / "stdout.log").read_text()
    assert "scalestudy-rank" not in log and log.strip() == reason  # no rank was launched


def test_open_mpis_mpi4py_under_mpichs_hydra_is_refused_too(tree, tmp_path, site_python):
    if "mpich" not in tree:
        pytest.skip("no Debian MPICH (scripts/system-packages.sh installs mpich)")
    clusters = cluster_dir(tmp_path, modules=[tree["mpich"]], launcher="mpiexec")
    metrics = run_point(site_python, pingpong_point(study="pp", mpi_flags={}), tmp_path, module_shell(tree), clusters)
    assert metrics["category"] == "mpi_mismatch", metrics["reason"]
    assert "Open MPI v4.1" in metrics["reason"] and "HYDRA" in metrics["reason"]


def test_the_site_venv_runs_on_the_modules_open_mpi_and_every_rank_names_it(tree, tmp_path, site_python):
    flags = {"btl": "self,vader", "coll_hcoll_enable": "1"}
    point = pingpong_point(study="pp", mpi_flag_set="vader-hcoll", mpi_flags=flags)
    metrics = run_point(
        site_python, point, tmp_path, module_shell(tree), cluster_dir(tmp_path, modules=[tree["openmpi"]])
    )
    assert metrics["status"] == "ok", metrics["reason"]
    version = tree["openmpi"].split("/")[1]
    provenance = metrics["provenance"]
    assert provenance["mpi"]["release"] == version and "/openmpi-" in provenance["mpi"]["launcher"]
    (library, ranks), *others = provenance["mpi_libraries"].items()
    assert not others and library.startswith(f"Open MPI v{version}") and ranks == [0, 1]
    assert all(rank["libmpi"].startswith("/usr/lib/") for rank in provenance["ranks"])  # not the venv's
    assert provenance["modules"] == [tree["openmpi"]]
    # The 4.1 build has vader, not hcoll: one flag registered, the other shown not applied.
    proof = metrics["settings_proof"]
    assert provenance["mca_registered"]["btl"] == "self,vader"
    assert not proof["verified"]
    assert proof["problems"] == ["--mca coll_hcoll_enable 1: no Open MPI component registered it; it had no effect"]


@pytest.mark.parametrize(
    "ranks, binding, mapping",
    [(2, "core", "default"), (4, "none", "default"), (2, "default", "slot")],
    ids=["bound-to-cores", "oversubscribed-unbound", "mapped-by-slot"],
)
def test_open_mpi_41_places_the_ranks_as_asked(tree, tmp_path, site_python, ranks, binding, mapping):
    """ORTE's mpirun takes the same placement options as PRRTE's: --map-by ppr:R:node (or the
    study's mapping), --bind-to, --oversubscribe (4 ranks on this machine's 2 cores); the
    binding is proven by each rank's own affinity."""
    point = pingpong_point(study="pp", ranks_per_node=ranks, binding=binding, mapping=mapping)
    metrics = run_point(
        site_python, point, tmp_path, module_shell(tree), cluster_dir(tmp_path, modules=[tree["openmpi"]])
    )
    assert metrics["status"] == "ok", metrics["reason"]
    proof = metrics["settings_proof"]
    assert proof["verified"], proof["problems"]
    assert proof["ranks_reported"] == ranks and len(metrics["provenance"]["mpi_libraries"]) == 1
    launch = (tmp_path / "run" / "launch.sh").read_text()
    assert "/openmpi-" in launch and "--oversubscribe" in launch
    if binding == "core":
        assert all(len(entry.rsplit(":", 1)[1].split(",")) == 1 for entry in proof["bindings"].split())


SNAKEFILE_STUDIES = {
    "pp": {"app": "pingpong", "params": {"max_bytes": 4096, "iterations": 50, "warmup": 10}},
    "coll": {
        "app": "collectives",
        "params": {"operation": "allreduce", "max_bytes": 4096, "iterations": 5, "warmup": 2},
    },  # fmt: skip
    "tp": {
        "app": "torch-parallel",
        "params": {
            "model": "mlp",
            "strategy": "ddp",
            "device": "cpu",
            "width": 32,
            "depth": 2,
            "batch_size": 16,
            "epochs": 1,
            "samples": 64,
        },
    },  # fmt: skip
    "cmd": {
        "app": "command",
        "command": "{python} -m mpi4py.bench pingpong -n 4096 -s 10 -l 20",
        "params": {"python": "python"},
        "primary": "latency",
        "figures": {"latency": {"regex": r"^\s*4096\s+[0-9.]+ \| ([0-9.eE+-]+)", "unit": "s", "better": "lower"}},
    },  # fmt: skip
    "lora": {
        "app": "litgpt",
        "walltime": "00:05:00",
        "params": {
            "method": "lora",
            "checkpoint_dir": "{results_dir}/assets/litgpt-tiny/checkpoint",
            "data_path": "{results_dir}/assets/litgpt-tiny/alpaca.json",
            "precision": "32-true",
            "max_seq_length": 64,
            "global_batch_size": 4,
            "micro_batch_size": 2,
            "max_steps": 2,
            "lr_warmup_steps": 1,
        },
    },  # fmt: skip
}
TINY_LITGPT = {"n_layer": 2, "n_head": 4, "n_embd": 64, "intermediate_size": 128, "vocab_size": 512,
               "block_size": 64, "samples": 64, "seed": 0}  # fmt: skip


def site_sweep(results: Path, studies: dict, cluster: str = "site") -> dict:
    common = {"nodes": [1], "ranks_per_node": [2], "repeats": 1, "walltime": "00:02:00", "mpi_flags": ["vader"]}
    return {
        "cluster": cluster,
        "results_dir": str(results),
        "mpi_flag_sets": {"vader": {"btl": "self,vader"}, "tcp": {"btl": "self,tcp"}},
        "assets": {"litgpt_tiny": TINY_LITGPT},
        "studies": {name: {**common, **study} for name, study in studies.items()},
    }


def snakemake(
    python: Path, tmp_path: Path, sweep: dict, env: dict, *args: str, profile: str = "profiles/local",
    timeout: float = 900,
) -> subprocess.CompletedProcess:  # fmt: skip
    """`timeout`: a run that should stop before any job gets minutes, not a whole study's time; past
    it, what Snakemake said is the failure's message."""
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep))
    command = [str(python), "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(REPO / profile), "--configfile", str(config), *args]  # fmt: skip
    try:
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        said = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr or ""
        raise AssertionError(f"snakemake still running after {timeout:.0f} s; it said: {said[-4000:]}") from None


def test_every_mpi4py_app_runs_on_the_site_module_through_snakemake(tree, tmp_path, site_python):
    results = tmp_path / "results"
    env = {
        **module_shell(tree, python=site_python),
        "SCALESTUDY_CLUSTERS_DIR": str(cluster_dir(tmp_path, modules=[tree["openmpi"]])),
    }
    run = snakemake(site_python, tmp_path, site_sweep(results, SNAKEFILE_STUDIES), env)
    assert run.returncode == 0, run.stderr[-4000:]
    version = tree["openmpi"].split("/")[1]
    for study in SNAKEFILE_STUDIES:
        runs = pd.read_csv(results / study / "runs.csv")
        assert set(runs["status"]) == {"ok"}, (study, runs["reason"].tolist())
        assert set(runs["mpi_library"]) == {f"Open MPI v{version} (ranks 0-1)"}, (study, runs["mpi_library"].tolist())
        assert set(runs["modules"]) == {tree["openmpi"]}, study
    page = (results / "report" / "index.md").read_text()
    assert f"Open MPI v{version} (ranks 0-1)" in (results / "report" / "index.html").read_text()
    assert "scalestudy" in page


def test_a_command_study_built_for_mpich_runs_on_the_site_modules_mpich(tree, tmp_path, site_mpich_python):
    """MPICH 4.0 as the site's module: a `command` study that says `mpi: mpich` (its program, here
    mpi4py.bench, built against MPICH), an MPICH flag set, the cluster file's MPICH launcher the
    module's mpiexec (Hydra); the venv built under that module (mpi4py against its mpicc) runs
    every rank on the module's libmpich, the record naming it and the module."""
    results = tmp_path / "results"
    clusters = cluster_dir(tmp_path, modules=[tree["mpich"]])
    data = yaml.safe_load((clusters / "site.yaml").read_text())
    data["mpi"]["mpich"] = {"launcher": "mpiexec", "source": "site", "extra_args": []}
    (clusters / "site.yaml").write_text(yaml.safe_dump(data))
    env = {**module_shell(tree, python=site_mpich_python), "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    sweep = site_sweep(results, {"cmd": {**SNAKEFILE_STUDIES["cmd"], "mpi": "mpich", "mpi_flags": ["nolocal"]}})
    sweep["mpi_flag_sets"] = {"nolocal": {"flavour": "mpich", "MPIR_CVAR_NOLOCAL": 1}}
    run = snakemake(site_mpich_python, tmp_path, sweep, env)
    assert run.returncode == 0, run.stderr[-4000:]
    runs = pd.read_csv(results / "cmd" / "runs.csv")
    assert set(runs["status"]) == {"ok"}, runs["reason"].tolist()
    (library,) = set(runs["mpi_library"])
    assert library.startswith(f"MPICH Version: {tree['mpich'].split('/')[1]}") and library.endswith("(ranks 0-1)")
    assert set(runs["modules"]) == {tree["mpich"]}
    record = json.loads(next(results.glob("cmd/runs/**/metrics.json")).read_text())
    assert "HYDRA" in record["provenance"]["mpi"]["version"] and "/mpich-" in record["provenance"]["mpi"]["launcher"]


def test_an_unknown_module_and_a_module_without_mpi_are_refused_before_any_job(tree, tmp_path, site_python):
    results = tmp_path / "results"
    sweep = site_sweep(results, {"pp": SNAKEFILE_STUDIES["pp"]})
    env = module_shell(tree, python=site_python)
    for modules, words in (
        (["openmpi/9.9.9"], "modules: 'openmpi/9.9.9' is not a module here"),
        (["tools/1.0"], "mpi.launcher: 'mpirun' (openmpi) is not on the PATH that tools/1.0 give"),
    ):
        clusters = cluster_dir(tmp_path, modules=modules)
        run = snakemake(site_python, tmp_path, sweep, {**env, "SCALESTUDY_CLUSTERS_DIR": str(clusters)})
        assert run.returncode != 0
        said = [line for line in run.stderr.splitlines() if words in line]
        assert len(said) == 1, run.stderr[-3000:]
        assert not (results / "pp" / "runs").exists()  # nothing ran


def test_env_modules_loads_an_apps_site_modules_in_its_jobs(tree, tmp_path, site_python):
    """`--sdm env-modules` with `app_modules: {pingpong: [openmpi/...]}`: Snakemake's own `module
    purge && module load` in the job; the shell that started it loaded nothing."""
    results = tmp_path / "results"
    clusters = cluster_dir(tmp_path, modules=[])
    data = yaml.safe_load((clusters / "site.yaml").read_text())
    data["app_modules"] = {"pingpong": [tree["openmpi"]]}
    (clusters / "site.yaml").write_text(yaml.safe_dump(data))
    env = {**module_shell(tree, python=site_python), "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    run = snakemake(
        site_python, tmp_path, site_sweep(results, {"pp": SNAKEFILE_STUDIES["pp"]}), env, "--sdm", "env-modules"
    )
    assert run.returncode == 0, run.stderr[-4000:]
    runs = pd.read_csv(results / "pp" / "runs.csv")
    assert set(runs["status"]) == {"ok"}, runs["reason"].tolist()
    assert set(runs["modules"]) == {tree["openmpi"]}
    assert set(runs["mpi_library"]) == {f"Open MPI v{tree['openmpi'].split('/')[1]} (ranks 0-1)"}


def slurm_cluster_dir(tmp_path: Path, tree: dict) -> Path:
    """cluster_dir's site cluster under the Open MPI module, on the tests' real Slurm (two 2-core nodes)."""
    clusters = cluster_dir(tmp_path, modules=[tree["openmpi"]])
    data = yaml.safe_load((clusters / "site.yaml").read_text())
    data.update(scheduler="slurm", cores_per_node=2, mem_per_node_gib=1, charge_rate=1.0)
    data.pop("nodes", None)
    (clusters / "site.yaml").write_text(yaml.safe_dump(data))
    return clusters


def test_slurm_runs_one_and_two_node_points_on_the_site_modules_open_mpi(tree, slurm, tmp_path, site_python):
    """profiles/slurm: sbatch per point, the job's runner loads the cluster file's module (the shell
    that submitted had Lmod, not the module), ORTE's mpirun starts the second node's orted with
    srun; every rank names the module's library."""
    results = tmp_path / "results"
    clusters = slurm_cluster_dir(tmp_path, tree)
    # TCP only: this Slurm's two nodes are one kernel under one host name (slurmd -N n1, -N n2), and
    # Open MPI 4.1's shared-memory transport, offered between them, crashed in vader_poll_handle_frag
    # (SIGSEGV; seen here); real nodes share no memory. The two-host bed's hosts have names of their own.
    sweep = site_sweep(results, {"pp": {**SNAKEFILE_STUDIES["pp"], "nodes": [1, 2], "mpi_flags": ["tcp"]}})
    env = {**module_shell(tree, python=site_python), **slurm.env, "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    env["PATH"] = f"{site_python.parent}:{BASE_PATH}"  # no pip MPI on it: the module's or none
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep))
    command = [str(site_python), "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
               "--profile", str(REPO / "profiles/slurm"), "--slurm-status-command", "squeue",
               "--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "2",
               "--config", "cluster=site", "--configfile", str(config)]  # fmt: skip
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    runs = pd.read_csv(results / "pp" / "runs.csv")
    assert sorted(runs["nodes"]) == [1, 2] and set(runs["status"]) == {"ok"}, runs["reason"].tolist()
    version = tree["openmpi"].split("/")[1]
    by_nodes = dict(zip(runs["nodes"], runs["mpi_library"], strict=True))
    assert by_nodes == {1: f"Open MPI v{version} (ranks 0-1)", 2: f"Open MPI v{version} (ranks 0-3)"}
    assert set(runs["modules"]) == {tree["openmpi"]}
    two = json.loads(next(results.glob("pp/runs/nodes2-*/**/metrics.json")).read_text())
    assert two["provenance"]["node_list"] == ["n1", "n2"] and two["provenance"]["job_id"]


@pytest.fixture(scope="module")
def litgpt_tiny(tmp_path_factory) -> Path:
    """The local study's stand-in model and data (apps.litgpt.assets)."""
    from scalestudy.apps.litgpt.assets import make_tiny_assets

    folder = tmp_path_factory.mktemp("litgpt-tiny")
    make_tiny_assets(folder / "checkpoint", folder / "alpaca.json", samples=64)
    return folder


# One rank a host, over TCP (the bed's hosts meet across their bridge).
ONE_RANK_A_HOST = {"nodes": 2, "ranks_per_node": 1, "gpus_per_node": 0, "mpi_flag_set": "tcp",
                   "mpi_flags": {"btl": "self,tcp"}, "nccl_env_set": "default", "nccl_env": {}}  # fmt: skip
COLLECTIVES = {"operation": "allreduce", "backend": "mpi", "iterations": 5, "warmup": 1, "max_bytes": 4096}
TORCH_DDP = {"mode": "throughput", "breakdown_steps": 0, "warmup_steps": 1, "steps": 2, "model": "mlp",
             "strategy": "ddp", "batch_size": 8}  # fmt: skip


def bed_point(app: str, assets: Path):
    """A 2-node point of `app` (LitGPT's on the tiny model `assets`)."""
    if app == "pingpong":
        return pingpong_point(study="pp", **ONE_RANK_A_HOST)
    if app == "collectives":
        return point(app=app, study="coll", walltime="00:02:00", params=COLLECTIVES, **ONE_RANK_A_HOST)
    if app == "torch-parallel":
        return point(app=app, study="tp", walltime="00:03:00", axes=("model", "strategy"), params=TORCH_DDP,
                     **ONE_RANK_A_HOST)  # fmt: skip
    lora = {**SNAKEFILE_STUDIES["lora"]["params"], "checkpoint_dir": str(assets / "checkpoint"),
            "data_path": str(assets / "alpaca.json")}  # fmt: skip
    return point(app=app, study="lora", walltime="00:04:00", params=lora, **ONE_RANK_A_HOST)


@pytest.mark.parametrize("app", ["pingpong", "collectives", "torch-parallel", "litgpt"])
def test_a_two_node_point_on_the_site_modules_open_mpi_across_two_hosts(
    tree, hosts, tmp_path, site_python, litgpt_tiny, app
):
    """The module's mpirun starts the second host's orted over ssh (ORTE's plm_rsh_agent); both
    hosts' ranks load the module's library, for each app whose ranks load it through mpi4py."""
    clusters = cluster_dir(tmp_path, modules=[tree["openmpi"]])
    env = {**module_shell(tree, python=site_python), **hosts.launch_env(), "SCALESTUDY_CLUSTERS_DIR": str(clusters),
           "PYTHONPATH": str(REPO / "workflow")}  # fmt: skip
    two_nodes = bed_point(app, litgpt_tiny)
    metrics = tmp_path / "run" / "metrics.json"
    command = [str(site_python), "-m", "scalestudy", "run-point", "--point", two_nodes.to_json(), "--walltime-s",
               str(two_nodes.walltime_seconds), "--cluster", "site", "--metrics", str(metrics)]  # fmt: skip
    done = subprocess.run(hosts.command(0, command), cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert metrics.is_file(), done.stderr[-3000:]
    record = json.loads(metrics.read_text())
    assert record["status"] == "ok", record["reason"]
    assert record["provenance"]["node_list"] == sorted(hosts.names)
    assert [rank["host"] for rank in record["provenance"]["ranks"]] == list(hosts.names)
    (library, ranks), *others = record["provenance"]["mpi_libraries"].items()
    assert not others and library.startswith("Open MPI v4.1") and ranks == [0, 1]
    assert record["settings_proof"]["verified"], record["settings_proof"]["problems"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def refused_before_any_job(run: subprocess.CompletedProcess, results: Path, *words: str) -> str:
    """The invocation stopped in one line holding every one of `words`, and no point ran."""
    assert run.returncode != 0, run.stderr[-3000:]
    said = [line for line in run.stderr.splitlines() if all(word in line for word in words)]
    assert len(said) == 1, run.stderr[-3000:]
    assert not any(results.glob("*/runs/**/metrics.json"))  # nothing recorded as a failed point
    return said[0]


def test_pips_venv_and_the_site_module_are_refused_once_before_any_job_in_either_order(tree, tmp_path):
    """The issue's new user: `module load openmpi/...` then `source .venv/bin/activate` (pip's
    mpirun first on PATH), and the other order, with `mpi.source: site`. Either way the launcher
    is the module's (the job's), the ranks' mpi4py pip's Open MPI 5: one line before any job."""
    results = tmp_path / "results"
    clusters = cluster_dir(tmp_path, modules=[tree["openmpi"]])
    loaded_then_activated = module_shell(tree, load=[tree["openmpi"]])
    loaded_then_activated["PATH"] = f"{PIP_PYTHON.parent}:{loaded_then_activated['PATH']}"
    activated_then_loaded = module_shell(tree, load=[tree["openmpi"]], python=PIP_PYTHON)
    version = tree["openmpi"].split("/")[1]
    for env in (loaded_then_activated, activated_then_loaded):
        sweep = site_sweep(results, {"pp": SNAKEFILE_STUDIES["pp"], "coll": SNAKEFILE_STUDIES["coll"]})
        run = snakemake(PIP_PYTHON, tmp_path, sweep, {**env, "SCALESTUDY_CLUSTERS_DIR": str(clusters)})
        words = ("site.yaml mpi.source: site:", "Open MPI v5", f"(Open MPI) {version}")
        line = refused_before_any_job(run, results, *words)
        assert f"openmpi-{version}/bin/mpirun" in line and "SCALESTUDY_MPI=site" in line, line


def test_pips_venv_under_the_site_module_is_refused_before_anything_is_submitted_to_slurm(tree, slurm, tmp_path):
    """The same user on real Slurm (profiles/slurm): `module load`, then pip's venv activated.
    One line before any sbatch; Slurm holds no job of the study."""
    results = tmp_path / "results"
    clusters = slurm_cluster_dir(tmp_path, tree)
    env = {**module_shell(tree, load=[tree["openmpi"]]), **slurm.env, "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    env["PATH"] = f"{PIP_PYTHON.parent}:{env['PATH']}"  # activated after the module: pip's mpirun first
    sweep = site_sweep(results, {"pp": SNAKEFILE_STUDIES["pp"]})
    run = snakemake(PIP_PYTHON, tmp_path, sweep, env, "--config", "cluster=site", profile="profiles/slurm", timeout=300)
    version = tree["openmpi"].split("/")[1]
    refused_before_any_job(run, results, "site.yaml mpi.source: site:", "Open MPI v5", f"(Open MPI) {version}")
    queue = subprocess.run(["squeue", "-h", "-o", "%j"], env=env, capture_output=True, text=True, check=True).stdout
    assert "pp" not in queue and not list(tmp_path.glob(".snakemake/slurm_logs/**/*.log")), queue


def test_python_env_with_a_site_venv_and_hydra_named_mpiexec_under_open_mpi_are_refused(tree, tmp_path, site_python):
    """`mpi.source: python_env` with a venv built against the site's MPI (no pip MPI beside it) is
    not silently run on the module's mpirun; a MPICH app whose launcher `mpiexec` is, under the
    Open MPI module, Open MPI's is refused before it fails with "unknown option -ppn"."""
    results = tmp_path / "results"
    env = module_shell(tree, load=[tree["openmpi"]], python=site_python)
    clusters = cluster_dir(tmp_path, modules=[tree["openmpi"]])
    data = yaml.safe_load((clusters / "site.yaml").read_text())
    data["mpi"]["source"] = "python_env"
    (clusters / "site.yaml").write_text(yaml.safe_dump(data))
    sweep = site_sweep(results, {"pp": SNAKEFILE_STUDIES["pp"]})
    run = snakemake(site_python, tmp_path, sweep, {**env, "SCALESTUDY_CLUSTERS_DIR": str(clusters)})
    refused_before_any_job(run, results, "mpi.source: python_env, but this Python's environment", "mpi.source: site")
    data["mpi"]["source"] = "site"
    data["mpi"]["mpich"] = {"launcher": "mpiexec", "source": "site", "extra_args": []}
    (clusters / "site.yaml").write_text(yaml.safe_dump(data))
    sweep = site_sweep(results, {"cmd": {**SNAKEFILE_STUDIES["cmd"], "mpi": "mpich", "mpi_flags": ["default"]}})
    run = snakemake(site_python, tmp_path, sweep, {**env, "SCALESTUDY_CLUSTERS_DIR": str(clusters)})
    refused_before_any_job(run, results, "mpi.mpich.launcher: 'mpiexec'", "openmpi's", "mpiexec.hydra")


def test_modules_that_load_two_mpis_are_refused_before_any_job(tree, tmp_path, site_python):
    if "mpich" not in tree:
        pytest.skip("no Debian MPICH (scripts/system-packages.sh installs mpich)")
    results = tmp_path / "results"
    clusters = cluster_dir(tmp_path, modules=[tree["openmpi"], tree["mpich"]])
    env = {**module_shell(tree, python=site_python), "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    run = snakemake(site_python, tmp_path, site_sweep(results, {"pp": SNAKEFILE_STUDIES["pp"]}), env)
    refused_before_any_job(run, results, "site.yaml modules:", f"leaves {tree['openmpi']} unloaded", "one MPI")


def test_repeats_of_a_point_on_two_mpis_are_two_results_and_the_first_is_kept(tree, tmp_path, site_python):
    """Repeat 0 on the site module's Open MPI 4.1 (the site venv), then repeat 1 added and run on
    pip's Open MPI 5 (the README's venv, `mpi.source: python_env`): scaling.csv has a row per MPI,
    never one mean of both; repeat 0's record is not rerun."""
    results = tmp_path / "results"
    clusters = cluster_dir(tmp_path, modules=[tree["openmpi"]])
    pp = {**SNAKEFILE_STUDIES["pp"], "mpi_flags": ["default"]}
    env = {**module_shell(tree, python=site_python), "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    run = snakemake(site_python, tmp_path, site_sweep(results, {"pp": pp}), env)
    assert run.returncode == 0, run.stderr[-4000:]
    (first,) = results.glob("pp/runs/**/metrics.json")
    before = first.read_text()
    data = yaml.safe_load((clusters / "site.yaml").read_text())
    data["mpi"]["source"], data["modules"] = "python_env", []
    (clusters / "site.yaml").write_text(yaml.safe_dump(data))
    env = {**module_shell(tree, python=PIP_PYTHON), "SCALESTUDY_CLUSTERS_DIR": str(clusters)}
    run = snakemake(PIP_PYTHON, tmp_path, site_sweep(results, {"pp": {**pp, "repeats": 2}}), env)
    assert run.returncode == 0, run.stderr[-4000:]
    assert first.read_text() == before  # the finished repeat was not rerun
    runs = pd.read_csv(results / "pp" / "runs.csv")
    assert set(runs["status"]) == {"ok"} and len(runs) == 2, runs["reason"].tolist()
    version = tree["openmpi"].split("/")[1]
    assert sorted(runs["mpi"].str.split(" under").str[0].str[:11]) == [f"openmpi {version}"[:11], "openmpi 5.0"]
    table = pd.read_csv(results / "pp" / "scaling.csv")
    primary = table[table["primary"]]
    assert len(primary) == 2 and set(primary["mpi"]) == set(runs["mpi"]), primary[["mpi", "variant"]]
    assert all(" on openmpi " in variant for variant in primary["variant"])
