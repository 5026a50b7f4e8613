"""Real collectives runs under mpirun: MPI and gloo, and a flag set that picks Open MPI's
allreduce algorithm, proven to have taken effect."""

import pytest
from points import point
from scalestudy.config import clusters
from scalestudy.launch.runner import run_point
from scalestudy.model.metrics import SIZE_TABLE


def collectives_point(**changes):
    params = {"operation": "allreduce", "iterations": 10, "warmup": 2, "max_bytes": 1024, **changes.pop("params", {})}
    values = dict(app="collectives", study="coll", ranks_per_node=2, nodes=1, gpus_per_node=0, walltime="00:02:00",
                  mpi_flag_set="default", nccl_env_set="default", mpi_flags={}, nccl_env={}, params=params)  # fmt: skip
    values.update(changes)
    return point(**values)


@pytest.mark.parametrize("backend", ["mpi", "gloo"])
def test_a_two_rank_run_records_its_whole_size_table(tmp_path, backend):
    metrics = run_point(collectives_point(params={"backend": backend}), tmp_path / "run", clusters.load("local"))
    assert metrics["status"] == "ok", metrics["reason"]
    table = metrics["figures"][SIZE_TABLE]
    assert [row["size_bytes"] for row in table] == [4 << k for k in range(9)]  # 4 B ... 1 KiB
    assert all(row["latency_avg_us"] > 0 and row["busbw_GBps"] == pytest.approx(row["algbw_GBps"]) for row in table)


def test_a_flag_set_naming_an_allreduce_algorithm_is_proven_to_take_effect(tmp_path):
    flags = {"coll_tuned_use_dynamic_rules": "1", "coll_tuned_allreduce_algorithm": "ring"}
    metrics = run_point(
        collectives_point(mpi_flag_set="ring", mpi_flags=flags), tmp_path / "run", clusters.load("local")
    )
    assert metrics["status"] == "ok", metrics["reason"]
    assert metrics["settings_proof"]["verified"] is True, metrics["settings_proof"]["problems"]
    assert metrics["provenance"]["mca_registered"]["coll_tuned_allreduce_algorithm"] == "ring"
