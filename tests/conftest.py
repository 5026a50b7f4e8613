import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(REPO / "workflow"))
# Helpers shared by the tiers: points built by hand, the browser check, a local Slurm.
sys.path.insert(0, str(Path(__file__).parent / "support"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A test run started in the background by a non-interactive shell (`cmd &`, as CI may start it)
# begins with SIGINT ignored, and every Snakemake a test starts would ignore the Ctrl-C the
# interrupt tests send it (Python keeps an ignored SIGINT ignored): the tests' SIGINT is
# caught again here, so that what they start gets the default action back at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="module")
def record_page(tmp_path_factory) -> Path:
    """The published Gadi HOOMD-blue record as a report page (index.html), made once per module."""
    from scalestudy.presentation.published_page import write_record_page

    return write_record_page(DATA / "gadi-2024-hoomd-wca-strong.csv", tmp_path_factory.mktemp("published"))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A real Slurm on this machine (tests/support/local_slurm.py), one per test module;
    skips, saying why, where it cannot run."""
    from local_slurm import LocalSlurm, unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Two real hosts on this machine (tests/support/hosts.py: network namespaces, each with its
    own host name, address, sshd, TMPDIR and CPU), one bed per test module; skips, saying why,
    where they cannot be made."""
    from hosts import Hosts, unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    bed = Hosts(tmp_path_factory.mktemp("hosts"), 2).start()
    yield bed
    bed.stop()


def pytest_sessionfinish(session):
    """The munged a local Slurm started ends with the session (on the controller only: xdist's
    workers end one by one, and another may still run a Slurm)."""
    if hasattr(session.config, "workerinput"):
        return
    from local_slurm import stop_munge_started_here

    stop_munge_started_here()


# ---------------------------------------------------------------- the suite across xdist workers
# How `pytest -n N` (scripts/test.sh) shares the tests out. One unit of work runs on one worker,
# its tests one after another; a unit is a test module (its module-scoped fixtures, such as the
# e2e study, run once), except:
# - the tests of one machine-wide thing are one unit, so that no worker sits waiting for another's:
#   every test that starts a real Slurm (one Slurm runs on a machine at a time:
#   tests/support/local_slurm.py holds a lock), and OpenPBS's (one server). The scheduler sees
#   test ids only, so they are named here by module or test; a test that asks for the `slurm`
#   fixture and is not named fails at collection, saying so.
REAL_SLURM = "real Slurm"
SHARED_RESOURCE = {
    REAL_SLURM: (
        "tests/integration/test_scheduler_integration.py",
        "tests/integration/test_slurm_hosts.py",
        "tests/integration/test_slurm_scheduler.py",
        "tests/integration/test_no_rank_left.py::test_scancel_of_a_running_slurm_job_leaves_no_rank",
        "tests/integration/test_site_mpi.py::test_slurm_runs_one_and_two_node_points_on_the_site_modules_open_mpi",
        "tests/integration/test_site_mpi.py::test_pips_venv_under_the_site_module_is_refused_before_anything_is_submitted_to_slurm",
    ),
    "OpenPBS": ("tests/integration/test_openpbs.py", "tests/integration/test_pbs_hosts.py"),
}
# - the benchmarks' smoke tests share nothing: each is a unit of its own; so do the app removals
#   (a copy of the checkout and dry runs each, 15-30 s).
EACH_TEST_ALONE = ("tests/integration/test_benchmarks.py", "tests/integration/test_remove_app.py")
# The longest units start first, so that the last ones to start are short (the order of the
# `--durations` of whole runs, longest first); the others follow in collection order, the unit
# tier last (many short modules: they fill the workers' ends).
LONGEST_FIRST = (
    REAL_SLURM,
    "tests/e2e/test_e2e.py",
    "tests/integration/test_torch_parallel_runs.py",
    "tests/integration/test_nothing_lost.py",
    "tests/integration/test_many_nodes.py",
    "tests/integration/test_site_mpi.py",
    "tests/integration/test_compare_studies.py",
    "tests/integration/test_workflow_checks.py",
    "tests/integration/test_ladder_runs.py",
    "tests/integration/test_new_scheduler.py",
    "OpenPBS",
)


def work_unit(nodeid: str) -> str:
    """The unit of work of a test (above), from its id: a shared resource's name, the test itself, or its module."""
    module, _, test = nodeid.partition("::")
    function = f"{module}::{test.split('[', 1)[0]}"
    for name, members in SHARED_RESOURCE.items():
        if module in members or function in members:
            return name
    return nodeid if module in EACH_TEST_ALONE else module


def pytest_collection_modifyitems(items):
    def rank(item) -> tuple[int, bool]:
        unit = work_unit(item.nodeid)
        if unit in LONGEST_FIRST:
            return LONGEST_FIRST.index(unit), False
        return len(LONGEST_FIRST), item.nodeid.startswith("tests/unit/")

    unnamed = [i.nodeid for i in items if "slurm" in i.fixturenames and work_unit(i.nodeid) != REAL_SLURM]
    if unnamed:
        raise pytest.UsageError(f"tests/conftest.py SHARED_RESOURCE: name {unnamed} under {REAL_SLURM!r}")
    items.sort(key=rank)  # stable: collection order within a rank


@pytest.hookimpl(optionalhook=True)  # xdist's hook: `-p no:xdist` runs the suite in one process
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the order above, not the units' sizes
    return ByWorkUnit(config, log)
