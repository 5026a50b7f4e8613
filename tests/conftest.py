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
