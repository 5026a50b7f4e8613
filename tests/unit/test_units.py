"""One memory unit, GB = 10^9 bytes, in every figure and check; foreign units (a batch
system's and a cluster file's 2^30-byte "GB", the kernel's KiB) converted where they come in."""

import pytest
from points import pingpong_point
from scalestudy.analysis.accounting import size_gb
from scalestudy.apps.litgpt.app import parse_litgpt
from scalestudy.apps.litgpt.rank import PEAK_RSS_PREFIX, PEAK_RSS_UNIT
from scalestudy.config import clusters
from scalestudy.config.clusters import Cluster, MpiLauncher
from scalestudy.launch.runner import resources
from scalestudy.model.errors import SweepError
from scalestudy.model.metrics import DECLARED
from scalestudy.model.units import MEMORY_UNIT

GIB = 1024**3


def test_auto_memory_is_the_machines_bytes_and_a_rank_gets_its_share_in_gb(monkeypatch):
    # A 16 GiB machine: the cluster's own number is the site's unit (2^30 bytes, as a request
    # would say it); what a rank may use against the memory model is in GB of 10^9 bytes.
    page = 4096
    monkeypatch.setattr(clusters.os, "sysconf", {"SC_PAGE_SIZE": page, "SC_PHYS_PAGES": 16 * GIB // page}.get)
    local = clusters.load("local")
    assert local.mem_per_node_gib == 16.0
    assert local.device_memory(0, 2) == (pytest.approx(16 * GIB / 1e9 / 2), "rank")


def test_a_gpus_memory_in_the_cluster_file_is_the_vendors_gb():
    cluster = Cluster("gpus", "none", 8, 1, 64.0, None, gpu_memory_gib=40.0)  # an A100-40GB
    assert cluster.device_memory(1, 1) == (pytest.approx(40 * GIB / 1e9), "GPU")


def test_litgpt_peak_rss_is_read_in_kib_and_the_old_gb_line_as_2_to_the_30():
    block = "| - Training Time             :  16.60 s                                          \n"
    new = parse_litgpt(f"{block}{PEAK_RSS_PREFIX} rank 0: 1000000 {PEAK_RSS_UNIT}\n")
    assert new["host_memory_peak_gb"] == pytest.approx(1.024)  # 10^6 KiB
    old = parse_litgpt(f"{block}{PEAK_RSS_PREFIX} rank 0: 1.000 GB\n")
    assert old["host_memory_peak_gb"] == pytest.approx(GIB / 1e9)


def test_a_pbs_usage_size_is_in_binary_units():
    assert size_gb("1GB") == pytest.approx(GIB / 1e9)
    assert size_gb("1024MB") == size_gb("1GB")
    assert size_gb("0B") == 0


def test_the_requested_memory_a_record_holds_is_in_gb():
    cluster = Cluster("one", "none", 2, 0, 8.0, 2.0, MpiLauncher(launcher="mpirun"))
    used = resources(pingpong_point(nodes=1, ranks_per_node=2), cluster, 1.0)
    assert used["memory_requested_gb"] == round(8 * GIB / 1e9, 4)  # the request: 8 (2^30 bytes)


def test_every_memory_figure_says_its_unit():
    memory = [m for name, m in DECLARED.items() if name.endswith("_gb")]
    assert memory and all(m.unit == MEMORY_UNIT for m in memory)


def test_a_memory_key_under_its_old_gb_name_is_refused_in_one_line_naming_the_new(tmp_path, monkeypatch):
    # `_gib` is 2^30 bytes (a cluster file's numbers), `_gb` 10^9 (records): an old cluster file's
    # `mem_per_node_gb` would otherwise be ignored and the node's memory taken from this machine.
    (tmp_path / "old.yaml").write_text(
        "name: old\nscheduler: none\ncores_per_node: 4\nmem_per_node_gb: 190\n"
        "queues:\n  gpu:\n    gpu_memory_gb: 32\n    mem_per_node_gib: 382\n"
    )
    monkeypatch.setenv("SCALESTUDY_CLUSTERS_DIR", str(tmp_path))
    with pytest.raises(SweepError) as refused:
        clusters.load("old")
    assert refused.value.problems == [
        f"{tmp_path}/old.yaml: mem_per_node_gb is now mem_per_node_gib (the same number: 2^30 bytes, as qsub's GB)",
        f"{tmp_path}/old.yaml: queues.gpu.gpu_memory_gb is now queues.gpu.gpu_memory_gib "
        "(the same number: 2^30 bytes, as qsub's GB)",
    ]
