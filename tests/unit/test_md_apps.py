"""The molecular-dynamics apps (HOOMD-blue WCA and its LAMMPS twin): parsers on recorded
output, command lines, MPI flavours, strong and weak scaling in the sweep."""

import dataclasses
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from points import HOSTILE, hoomd_points, md_config, point
from scalestudy.analysis.scaling import scaling
from scalestudy.apps.hoomd import rank as hoomd_wca
from scalestudy.apps.hoomd.app import parse_hoomd
from scalestudy.apps.lammps.app import parse_lammps
from scalestudy.apps.registry import APPS, ParseError
from scalestudy.config import clusters, study
from scalestudy.config.clusters import MpiLauncher
from scalestudy.launch.command import mpirun_command
from scalestudy.model.errors import SweepError
from scalestudy.model.paths import Layout
from snakemake.io import regex_from_filepattern, update_wildcard_constraints
from snakemake.utils import format as snakemake_format


def problems_of(config):
    with pytest.raises(SweepError) as raised:
        study.load(config)
    return raised.value.problems


# ---------------------------------------------------------------- LAMMPS output


def test_lammps_parser_takes_the_timed_runs_not_the_warm_up(data_dir):
    figures = parse_lammps((data_dir / "lammps-2025.7.22.4-wca-2ranks.log").read_text())
    assert figures["steps_per_s_runs"] == [1152.977, 1049.331, 893.900]
    assert figures["steps_per_s"] == pytest.approx((1152.977 + 1049.331 + 893.900) / 3)
    assert figures["time_per_step_ms"] == pytest.approx(1000 / figures["steps_per_s"])
    assert figures["particles"] == 4000
    assert figures["particle_steps_per_s"] == pytest.approx(4000 * figures["steps_per_s"])
    assert figures["domain_decomposition"] == "1x1x2"
    assert figures["timed_runs"] == 3


def test_lammps_run_cut_short_is_unparseable(data_dir):
    text = (data_dir / "lammps-2025.7.22.4-wca-2ranks.log").read_text()
    with pytest.raises(ParseError, match="timed run 3 has no 'Performance"):
        parse_lammps(text[: text.index("scalestudy: timed run 3 of 3")] + "scalestudy: timed run 3 of 3\n")
    with pytest.raises(ParseError, match="2 of 3 timed runs"):
        parse_lammps(text[: text.index("scalestudy: timed run 3 of 3")])
    with pytest.raises(ParseError, match="no 'scalestudy: done' line"):
        parse_lammps(text[: text.index("scalestudy: done")])
    with pytest.raises(ParseError, match="stopped before timing"):
        parse_lammps(text[: text.index("scalestudy: timed run 1")])


def test_lammps_rank_command_passes_the_physics_as_variables(tmp_path):
    loaded = study.load(md_config(N=4000, warmup_steps=100, benchmark_steps=200, repeat=2, executable="lmp_mpi"))
    command = APPS["lammps"].rank_command(loaded.points[-1], tmp_path, Layout())
    assert command[0] == "lmp_mpi" and command[1] == "-in" and command[2].endswith("wca.in")
    variables = {command[i + 1]: command[i + 2] for i, arg in enumerate(command) if arg == "-var"}
    assert variables == {
        "N": "4000",
        "rho": "1.0",
        "seed": "1",
        "warmup_steps": "100",
        "benchmark_steps": "200",
        "repeat": "2",
    }


def test_a_relative_executable_path_is_the_repositorys(repo, tmp_path):
    loaded = study.load(md_config(N=10, executable=".venv-lammps/bin/lmp"))
    assert APPS["lammps"].rank_command(loaded.points[0], tmp_path, Layout())[0] == str(repo / ".venv-lammps/bin/lmp")


# ---------------------------------------------------------------- MPI flavours


def test_mpich_flag_sets_become_environment_variables_through_hydra():
    mpich_point = point(app="lammps", mpi_flags={"MPIR_CVAR_NOLOCAL": "1"}, nccl_env={}, params={"N": 10})
    argv = mpirun_command(mpich_point, ["lmp"], {"OMP_NUM_THREADS": "1"}, MpiLauncher("mpich", "/x/mpiexec"))
    assert argv == [
        "/x/mpiexec", "-n", "8", "-ppn", "4",
        "-genv", "OMP_NUM_THREADS", "1", "-genv", "MPIR_CVAR_NOLOCAL", "1",
        "lmp",
    ]  # fmt: skip
    hosts = mpirun_command(mpich_point, ["lmp"], {}, MpiLauncher("mpich", "mpiexec"), ["n1", "n2", "n3"])
    assert hosts[hosts.index("-hosts") + 1] == "n1:4,n2:4"
    assert "--mca" not in hosts and "--oversubscribe" not in hosts
    # Only a 1-node point's proxy is forked; a 2-node point's go through Hydra's own launcher.
    assert "-launcher" not in hosts
    one_node = mpirun_command(dataclasses.replace(mpich_point, nodes=1), ["lmp"], {}, MpiLauncher("mpich", "mpiexec"))
    assert one_node[one_node.index("-launcher") + 1] == "fork"


def test_a_hostile_mpich_value_stays_one_argument():
    hostile = point(app="lammps", mpi_flags={"MPIR_CVAR_X": HOSTILE}, nccl_env={}, params={"N": 10})
    argv = mpirun_command(hostile, ["lmp"], {}, MpiLauncher("mpich", "mpiexec"))
    assert argv[argv.index("MPIR_CVAR_X") + 1] == HOSTILE


def test_expanded_mpich_set_drops_the_flavour_key():
    config = md_config(N=10)
    config["studies"]["md"]["mpi_flags"] = ["default", "nolocal"]
    flags = {p.mpi_flag_set: dict(p.mpi_flags) for p in study.load(config).points}
    assert flags == {"default": {}, "nolocal": {"MPIR_CVAR_NOLOCAL": "1"}}


def test_a_set_of_the_other_mpi_is_refused_at_load():
    config = md_config(N=10)
    config["studies"]["md"]["mpi_flags"] = ["default", "no-ucx"]
    assert problems_of(config) == [
        "studies.md.mpi_flags[1]: set 'no-ucx' is for openmpi but app 'lammps' runs on mpich;"
        " sets that fit: default, nolocal"
    ]


def test_an_open_mpi_set_naming_mpichs_variables_is_a_set_for_the_other_flavour():
    """Open MPI would take `--mca MPIR_CVAR_CH4_NETMOD ofi` as an unknown parameter and ignore it."""
    config = md_config(N=10)
    config["mpi_flag_sets"]["ofi"] = {"MPIR_CVAR_CH4_NETMOD": "ofi"}
    assert problems_of(config) == [
        "mpi_flag_sets.ofi.MPIR_CVAR_CH4_NETMOD: an environment variable in a set for openmpi, whose sets are MCA "
        "parameters (lower-case, e.g. btl); allowed: `flavour: mpich` for a set of MPICH's variables, or Open MPI's "
        "MCA names"
    ]


def test_an_mpich_set_must_hold_environment_variable_names():
    config = md_config(N=10)
    config["mpi_flag_sets"]["bad"] = {"flavour": "mpich", "btl": "self"}
    assert problems_of(config)[0].startswith("mpi_flag_sets.bad.btl: an MPICH set holds environment variables")


def test_unknown_flavour_is_refused():
    config = md_config(N=10)
    config["mpi_flag_sets"]["bad"] = {"flavour": "intelmpi"}
    assert problems_of(config)[0].startswith(
        "mpi_flag_sets.bad.flavour: 'intelmpi' is not allowed; allowed: openmpi, mpich"
    )


def test_cluster_launcher_per_flavour():
    local = clusters.load("local")
    assert local.launcher_for("openmpi").launcher == "mpirun"
    mpich = local.launcher_for("mpich")
    assert mpich.flavour == "mpich" and mpich.launcher.endswith("bin/mpiexec")
    bare = clusters.from_mapping({"name": "bare", "mpi": {"launcher": "mpirun"}})
    with pytest.raises(SweepError, match="no launcher for mpich .*add mpi.mpich.launcher"):
        bare.launcher_for("mpich")


# ---------------------------------------------------------------- strong and weak scaling


def test_weak_scaling_grows_n_with_ranks():
    loaded = study.load(md_config(scaling="weak", particles_per_rank=1000))
    sizes = {p.ranks: APPS["lammps"].particles(p) for p in loaded.points}
    assert sizes == {1: 1000, 2: 2000, 4: 4000}
    assert {p.scaling for p in loaded.points} == {"weak"}


@pytest.mark.parametrize(
    ("scaling", "params", "expected"),
    [
        ("strong", {"particles_per_rank": 10}, "studies.md.params: strong scaling needs params.N"),
        ("weak", {"N": 10}, "studies.md.params: weak scaling needs params.particles_per_rank"),
        ("strong", {"N": 0}, "studies.md.params.N: 0 must be at least 1"),
        ("strong", {"N": 10, "density": "dense"}, "studies.md.params.density: 'dense' is not a number"),
    ],
)
def test_md_params_are_checked_at_load(scaling, params, expected):
    problems = problems_of(md_config(scaling=scaling, **params))
    assert len(problems) == 1 and problems[0].startswith(expected), problems


# ---------------------------------------------------------------- HOOMD-blue output


def test_hoomd_reference_verbose_shape(data_dir):
    figures = parse_hoomd((data_dir / "hoomd-4.8.2-reference-verbose-2ranks.log").read_text())
    assert figures["steps_per_s_runs"] == [169.29620351570654, 109.14197165844936]
    assert figures["steps_per_s"] == pytest.approx(139.21908758707795)
    assert figures["domain_decomposition"] == "1x1x2"
    assert "particles" not in figures  # the reference does not print N


def test_hoomd_reference_plain_shape_is_the_mean_alone(data_dir):
    figures = parse_hoomd((data_dir / "hoomd-4.8.2-reference-plain-1rank.log").read_text())
    assert figures["steps_per_s"] == 603.0728057350493
    assert figures["time_per_step_ms"] == pytest.approx(1000 / 603.0728057350493)
    assert "steps_per_s_runs" not in figures and "domain_decomposition" not in figures


def test_hoomd_scalestudy_script_shape(data_dir):
    figures = parse_hoomd((data_dir / "hoomd-4.8.2-scalestudy-2ranks.log").read_text())
    assert figures["steps_per_s_runs"] == [340.7167795177427, 137.64791645101826]
    assert figures["particles"] == 4000
    assert figures["particle_steps_per_s"] == pytest.approx(4000 * 239.18234798438047)


def test_hoomd_suite_line_and_broken_outputs():
    assert parse_hoomd("MDPairWCA: 999.5\n")["steps_per_s"] == 999.5
    with pytest.raises(ParseError, match="not the mean"):
        parse_hoomd(".. 100.0 time steps per second\n.. 200.0 time steps per second\n175.0\n")
    with pytest.raises(ParseError, match="no time steps per second"):
        parse_hoomd("notice(2): Using domain decomposition: n_x = 1 n_y = 1 n_z = 2.\n.. warming up for 10 steps\n")


def test_hoomd_rank_commands_for_both_harnesses(tmp_path):
    point = hoomd_points(N=4000, warmup_steps=100, benchmark_steps=200, repeat=3)[-1]
    ours = APPS["hoomd"].rank_command(point, tmp_path, Layout())
    assert ours[1:4] == ["-m", "scalestudy.apps.hoomd.rank", "benchmark"]
    assert ours[ours.index("--initial-state") + 1].endswith("results/assets/hoomd-wca/hard_sphere_4000_1.0_3.gsd")
    assert ours[ours.index("--device") :] == [
        "--device", "CPU", "--warmup_steps", "100", "--benchmark_steps", "200", "--repeat", "3",
    ]  # fmt: skip
    reference = APPS["hoomd"].rank_command(hoomd_points(N=4000, harness="hoomd_benchmarks")[-1], tmp_path, Layout())
    assert reference[3] == "reference" and reference[reference.index("--run-dir") + 1] == str(tmp_path.resolve())
    harness_args = reference[reference.index("--") + 1 :]
    assert harness_args[:8] == ["--device", "CPU", "-N", "4000", "--rho", "1.0", "--dimensions", "3"]
    assert harness_args[-1] == "-v"


def test_hoomd_initial_state_is_one_file_per_n_density_dimensions():
    strong = hoomd_points(N=4000)
    assert {APPS["hoomd"].inputs(p, Layout())["initial_state"] for p in strong} == {
        "results/assets/hoomd-wca/hard_sphere_4000_1.0_3.gsd"
    }
    # Wherever the results are (Gadi: /scratch), the state is under their assets.
    elsewhere = Layout("/scratch/ab12/results")
    weak = study.load(md_config(app="hoomd", scaling="weak", particles_per_rank=1000, density=0.9)).points
    by_key = study.inputs_by_key(weak, elsewhere)
    assert sorted(inputs["initial_state"] for _point, inputs in by_key.values()) == [
        "/scratch/ab12/results/assets/hoomd-wca/hard_sphere_1000_0.9_3.gsd",
        "/scratch/ab12/results/assets/hoomd-wca/hard_sphere_2000_0.9_3.gsd",
        "/scratch/ab12/results/assets/hoomd-wca/hard_sphere_4000_0.9_3.gsd",
    ]


def test_the_initial_state_rule_makes_the_file_each_point_reads(tmp_path, monkeypatch):
    """The rule (apps/hoomd/rules.smk) only wires what the app declares: its output pattern,
    under its wildcard constraints as Snakemake reads them, matches the state every point reads,
    and its command on those wildcards is one the rank program reads as that point's N, density
    and dimensions, writing that file."""
    hoomd = APPS["hoomd"]
    layout = Layout(str(tmp_path / "results dir"))
    rule_output = update_wildcard_constraints(hoomd.state_pattern(layout), hoomd.state_wildcards, {})
    output_regex = re.compile(regex_from_filepattern(rule_output))
    made = []
    monkeypatch.setattr(hoomd_wca, "initial_state", lambda *args: made.append(args))
    weak_2d = md_config(app="hoomd", scaling="weak", particles_per_rank=1000, density=0.9, dimensions=2)
    points = [*hoomd_points(N=4000, density=2), *study.load(weak_2d).points]
    wanted = []
    for each in points:
        state = hoomd.inputs(each, layout)["initial_state"]
        wildcards = output_regex.fullmatch(state)
        assert wildcards, f"{state} is not the rule's output {rule_output}"
        filled = {"wildcards": SimpleNamespace(**wildcards.groupdict()), "output": [state]}
        assert hoomd_wca.main(shlex.split(snakemake_format(hoomd.make_state_arguments, **filled))) == 0
        density, dimensions = hoomd.setting(each, "density"), hoomd.setting(each, "dimensions")
        wanted.append((hoomd.particles(each), float(density), dimensions, Path(state), "CPU"))
    assert made == wanted
    assert {args[:3] for args in made} == {(4000, 2.0, 3), (1000, 0.9, 2), (2000, 0.9, 2), (4000, 0.9, 2)}


def test_weak_efficiency_of_md_is_per_time_step():
    """N grows with p: ideal steps/s stays flat, so efficiency is T(p0)/T(p) = rate(p)/rate(p0)."""
    rows = [
        {"study": "w", "app": "hoomd", "scaling": "weak", "variant": "mpi-default/nccl-default",
         "mpi_flag_set": "default", "nccl_env_set": "default", "nodes": 1, "ranks_per_node": ranks,
         "gpus_per_node": 0, "ranks": ranks, "repeat": 1, "status": "ok",
         "steps_per_s": rate, "time_per_step_ms": 1000 / rate, "particle_steps_per_s": 1000 * ranks * rate}
        for ranks, rate in ((1, 1000.0), (4, 800.0))
    ]  # fmt: skip
    table = scaling(pd.DataFrame(rows)).set_index(["metric", "ranks"])
    for metric in ("steps_per_s", "time_per_step_ms", "particle_steps_per_s"):
        assert table.loc[(metric, 4), "weak_efficiency"] == pytest.approx(0.8), metric
