"""A site's MPI, without a process: what each MPI's own words say it is (recorded from Debian's
Open MPI 4.1.4, MPICH 4.0.2 and pip's Open MPI 5.0.11 on this machine), when a rank's library and
its launcher are one MPI, the lines that refuse a mismatch, the cluster file's `mpi.source`, the
module system's words, the job script's module lines, and the report's columns. The same paths
with real modules, launchers and ranks: tests/integration/test_site_mpi.py."""

import pytest
import yaml
from scalestudy.analysis.records import mpi_columns, ranks_text
from scalestudy.config import clusters
from scalestudy.launch import modules
from scalestudy.launch.provenance import (
    library_mismatch,
    mpi_identity,
    rank_libraries,
    rank_library_mismatch,
    version_said,
)
from scalestudy.model import rank_probe
from scalestudy.model.errors import SweepError
from scalestudy.scheduler.pbs.submit import site_environment

# What each tool printed here (first lines; Hydra's version is on its second line).
OPEN_MPI_4_LAUNCHER = "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
OPEN_MPI_4_ORTE = "mpirun.openmpi (OpenRTE) 4.1.4\n"
OPEN_MPI_5_LAUNCHER = "mpirun (Open MPI) 5.0.11\n"
HYDRA_4_LAUNCHER = "HYDRA build details:\n    Version:                                 4.0.2\n"
OPEN_MPI_4_LIBRARY = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
OPEN_MPI_5_LIBRARY = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11"
MPICH_4_LIBRARY = "MPICH Version:      4.0.2"
LMOD_UNKNOWN = """Lmod has detected the following error: The following module(s) are unknown:
"nosuch/1"

Please check the spelling or version number. Also try "module spider ..."
It is also possible your cache file is out-of-date; it may help to try:
  $ module --ignore_cache load "nosuch/1"

Also make sure that all modulefiles written in TCL start with the string #%Module
"""


@pytest.mark.parametrize(
    "text, identity",
    [
        (OPEN_MPI_4_LAUNCHER, ("openmpi", "4.1.4")),
        (OPEN_MPI_4_ORTE, ("openmpi", "4.1.4")),
        (OPEN_MPI_5_LAUNCHER, ("openmpi", "5.0.11")),
        (HYDRA_4_LAUNCHER, ("mpich", "4.0.2")),
        (OPEN_MPI_4_LIBRARY, ("openmpi", "4.1.4")),
        (OPEN_MPI_5_LIBRARY, ("openmpi", "5.0.11")),
        (MPICH_4_LIBRARY, ("mpich", "4.0.2")),
        ("Intel(R) MPI Library 2021.10", None),
        (None, None),
    ],
)
def test_each_mpi_is_known_by_its_own_words(text, identity):
    assert mpi_identity(text) == identity


def launcher(version: str) -> dict:
    return version_said("/site/openmpi/bin/mpirun", version)


def test_hydras_version_is_its_release_not_its_heading():
    assert version_said("/usr/bin/mpiexec", HYDRA_4_LAUNCHER)["version"] == "HYDRA build details 4.0.2"
    assert version_said("/usr/bin/mpirun", OPEN_MPI_4_LAUNCHER)["version"] == "mpirun (Open MPI) 4.1.4"


def test_pips_library_under_the_sites_mpirun_is_one_line_naming_both_sides():
    said = library_mismatch(
        launcher(OPEN_MPI_4_LAUNCHER), {"mpi_library": OPEN_MPI_5_LIBRARY, "libmpi": "/v/.venv/lib/libmpi.so.40"}
    )
    assert said is not None and "\n" not in said
    assert said.startswith("the ranks' mpi4py loads Open MPI v5.0.11 (/v/.venv/lib/libmpi.so.40) but the launcher is")
    assert "/site/openmpi/bin/mpirun (mpirun (Open MPI) 4.1.4)" in said and "SCALESTUDY_MPI=site" in said


@pytest.mark.parametrize(
    "version, library, mismatch",
    [
        (OPEN_MPI_4_LAUNCHER, OPEN_MPI_4_LIBRARY, False),
        (OPEN_MPI_4_LAUNCHER, "Open MPI v4.1.5, package: HPC-X", False),  # same runtime, another patch
        (OPEN_MPI_4_LAUNCHER, "Open MPI v4.0.7, package: x", True),  # ORTE changed between 4.0 and 4.1
        (OPEN_MPI_4_LAUNCHER, OPEN_MPI_5_LIBRARY, True),
        (OPEN_MPI_5_LAUNCHER, OPEN_MPI_5_LIBRARY, False),
        (HYDRA_4_LAUNCHER, MPICH_4_LIBRARY, False),
        (HYDRA_4_LAUNCHER, "MPICH Version:      4.1.2", False),  # Hydra's PMI serves its major release
        (HYDRA_4_LAUNCHER, OPEN_MPI_4_LIBRARY, True),
        (OPEN_MPI_4_LAUNCHER, MPICH_4_LIBRARY, True),
        ("srun: slurm 22.05.8", OPEN_MPI_4_LIBRARY, False),  # a launcher of no known MPI: recorded, not refused
    ],
)
def test_a_library_runs_under_a_launcher_of_its_flavour_and_release(version, library, mismatch):
    assert (library_mismatch(launcher(version), {"mpi_library": library}) is not None) is mismatch


def test_a_python_that_loads_no_mpi_is_said_with_its_error():
    said = library_mismatch(
        launcher(OPEN_MPI_4_LAUNCHER), {"mpi_library": None, "mpi_library_error": "No module named 'mpi4py'"}
    )
    assert said == (
        "the ranks' mpi4py loads no MPI library (No module named 'mpi4py'); "
        "the launcher is /site/openmpi/bin/mpirun (mpirun (Open MPI) 4.1.4)"
    )


def test_each_ranks_library_is_grouped_and_the_first_stray_rank_is_named():
    ranks = [
        {"rank": 0, "host": "n1", "mpi_library": OPEN_MPI_4_LIBRARY},
        {"rank": 1, "host": "n2", "mpi_library": OPEN_MPI_5_LIBRARY, "libmpi": "/v/lib/libmpi.so.40"},
        {"rank": 2, "host": "n2", "mpi_library": OPEN_MPI_4_LIBRARY},
    ]
    assert rank_libraries(ranks) == {OPEN_MPI_4_LIBRARY: [0, 2], OPEN_MPI_5_LIBRARY: [1]}
    assert rank_libraries([{"rank": 0}]) is None  # an app whose ranks load no MPI through mpi4py
    said = rank_library_mismatch(launcher(OPEN_MPI_4_LAUNCHER), ranks)
    assert said.startswith("rank 1 on n2 loads Open MPI v5.0.11 (/v/lib/libmpi.so.40) but the launcher is")
    assert rank_library_mismatch(launcher(OPEN_MPI_4_LAUNCHER), [ranks[0], ranks[2]]) is None


def test_every_ranks_library_is_known_by_the_file_it_mapped(tmp_path):
    """Apps that do not load MPI through mpi4py (LAMMPS, HOOMD-blue, a command): the library file
    a rank mapped (its host's watcher reads /proc/<pid>/maps), named by the library itself."""
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0-7f1 r-xp 00000000 fe:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f2-7f3 r-xp 00000000 fe:01 2 /v/.venv-lammps/lib/libmpi.so.12\n"
        "7f4-7f5 rw-p 00000000 00:00 0 [heap]\n"
    )
    assert rank_probe.mapped_libmpi(str(maps)) == "/v/.venv-lammps/lib/libmpi.so.12"
    assert rank_probe.mapped_libmpi(str(tmp_path / "gone")) is None
    ranks = [{"rank": 0, "mapped_mpi_library": MPICH_4_LIBRARY}, {"rank": 1, "mapped_mpi_library": MPICH_4_LIBRARY}]
    assert rank_libraries(ranks) == {MPICH_4_LIBRARY: [0, 1]}
    # A mapped library is recorded, never refused: only the ranks' own mpi4py answer is checked.
    assert rank_library_mismatch(launcher(OPEN_MPI_4_LAUNCHER), ranks) is None


def test_the_report_names_each_library_with_its_ranks_and_the_modules():
    provenance = {"mpi_libraries": {OPEN_MPI_4_LIBRARY: [0, 1, 2, 5]}, "modules": ["openmpi/4.1.4", "ucx/1.13"]}
    assert mpi_columns(provenance) == {
        "mpi_library": "Open MPI v4.1.4 (ranks 0-2, 5)",
        "modules": "openmpi/4.1.4 ucx/1.13",
        "mpi": "openmpi 4.1.4 under openmpi/4.1.4 ucx/1.13",
    }
    assert mpi_columns({"modules": []}) == {"modules": "none", "mpi": ""}  # a module system with nothing loaded
    assert mpi_columns({"modules": None}) == {"mpi": ""}  # no module system
    assert ranks_text([3, 1, 2]) == "1-3"


def write_cluster(tmp_path, monkeypatch, **mpi) -> None:
    data = {"name": "c", "scheduler": "none", "cores_per_node": 2, "mem_per_node_gib": 4, "charge_rate": 0,
            "mpi": {"flavour": "openmpi", "launcher": "mpirun", **mpi}}  # fmt: skip
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setenv("SCALESTUDY_CLUSTERS_DIR", str(tmp_path))


def test_mpi_source_is_site_unless_the_cluster_file_says_python_env(tmp_path, monkeypatch):
    write_cluster(tmp_path, monkeypatch)
    assert clusters.load("c").mpi.source == "site" and not clusters.load("c").mpi.from_python_env
    write_cluster(tmp_path, monkeypatch, source="python_env")
    assert clusters.load("c").mpi.from_python_env
    monkeypatch.delenv("SCALESTUDY_CLUSTERS_DIR")
    assert clusters.load("local").mpi.from_python_env  # the shipped local cluster: pip's MPI
    assert {clusters.load(name).mpi.source for name in ("gadi", "aspire2a", "slurm")} == {"site"}


@pytest.mark.parametrize(
    "mpi, line",
    [
        ({"source": "module"}, "c.yaml: mpi.source 'module'; allowed: site, python_env"),
        (
            {"from_python_env": True},
            "c.yaml: mpi.from_python_env is now mpi.source (python_env for true, site for false); "
            "allowed: site, python_env",
        ),
    ],
)
def test_a_wrong_mpi_source_is_one_line_naming_the_key(tmp_path, monkeypatch, mpi, line):
    write_cluster(tmp_path, monkeypatch, **mpi)
    with pytest.raises(SweepError) as refused:
        clusters.load("c")
    assert len(refused.value.problems) == 1 and refused.value.problems[0].endswith(line)


def test_lmods_message_is_one_line_without_its_advice():
    assert modules.one_line(LMOD_UNKNOWN) == (
        'Lmod has detected the following error: The following module(s) are unknown: "nosuch/1"'
    )


def test_which_modules_are_loaded_and_which_are_not():
    environ = {"LOADEDMODULES": "openmpi/4.1.4:ucx/1.13", "MODULESHOME": "/nowhere"}
    assert modules.loaded(environ) == ["openmpi/4.1.4", "ucx/1.13"]
    assert modules.not_loaded(["openmpi", "ucx/1.13", "libfabric/1.11"], environ) == ["libfabric/1.11"]
    assert modules.loaded({}) is None


def test_the_site_mpi_asked_for_where_there_is_no_module_system_is_one_line(tmp_path, monkeypatch):
    write_cluster(tmp_path, monkeypatch)
    cluster = clusters.load("c")
    cluster = type(cluster)(**{**cluster.__dict__, "modules": ("openmpi/4.1.5",)})
    said = modules.site_problems(cluster, [cluster.mpi], environ={})
    assert len(said) == 1 and said[0].endswith(
        "c.yaml modules: openmpi/4.1.5 cannot be loaded: this machine has no module system (MODULESHOME is not set: "
        "`module` is defined by a site's login shell); run from the site's login shell, or, without the site's "
        "MPI, set mpi.source: python_env"
    )
    # The local cluster: LAMMPS's MPICH is the repository's path, no module named: nothing to check.
    monkeypatch.delenv("SCALESTUDY_CLUSTERS_DIR")
    local = clusters.load("local")
    assert modules.site_problems(local, [local.mpi, local.launcher_for("mpich")], environ={}) == []
    python_env = type(cluster.mpi)(source="python_env")
    assert modules.site_problems(cluster, [python_env], environ={}) == []  # pip's MPI needs no module
    with pytest.raises(modules.ModuleError, match="no module system here to load openmpi/4.1.5"):
        modules.load(["openmpi/4.1.5"], {})


def test_the_job_script_uses_the_module_paths_then_loads_the_modules_quoted(tmp_path, monkeypatch):
    write_cluster(tmp_path, monkeypatch)
    cluster = clusters.load("c")
    hpcx = "/apps/hpcx v2.20/modulefiles"
    cluster = type(cluster)(**{**cluster.__dict__, "modules": ("hpcx-ompi", "a;b"), "module_paths": (hpcx,)})
    lines = site_environment(cluster).splitlines()
    assert lines.index("module use '/apps/hpcx v2.20/modulefiles'") < lines.index("module load hpcx-ompi 'a;b'")


def test_a_librarys_name_is_its_first_line_with_its_blanks_one_space_each():
    from scalestudy.model.rank_probe import library_name

    mpich = "MPICH Version:\t4.0.2\nMPICH Release date:\tThu May 26 2022\n"
    assert library_name(mpich) == "MPICH Version: 4.0.2"
    assert library_name("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4\x00") == (
        "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4"
    )
    assert library_name("") == ""
