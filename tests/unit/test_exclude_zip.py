"""`exclude` and `zip` in a study: combinations left out of the cross product, axes tied
together; checked at load, one line per problem naming the key; the points that remain keep
the ids the full cross product gave them (recorded below from 25b3435, before exclude and
zip existed), so nothing finished reruns."""

import copy

import pytest
from scalestudy.bookkeeping.history import Survey, summary_line
from scalestudy.config import sweep
from scalestudy.model.errors import SweepError

CONFIG = {
    "cluster": "local",
    "mpi_flag_sets": {
        "default": {},
        "allreduce-ring": {"coll_tuned_use_dynamic_rules": 1, "coll_tuned_allreduce_algorithm": "ring"},
    },
    "studies": {
        "coll": {"app": "collectives", "nodes": [1], "ranks_per_node": [2], "mpi_flags": ["default", "allreduce-ring"],
                 "repeats": 1, "params": {"backend": ["mpi", "gloo"], "operation": ["allreduce", "alltoall"]}},
        "weak": {"app": "pingpong", "nodes": [1, 2, 4], "ranks_per_node": [1], "repeats": 1,
                 "params": {"max_bytes": [1024, 2048, 4096]}},
    },
}  # fmt: skip
# The ids 25b3435 gave CONFIG's points (python -c "... sweep.load(CONFIG) ..." on that commit).
IDS_AT_25B3435 = {
    "coll": [
        "backend-mpi/operation-allreduce/nodes1-rpn2/mpi-default/nccl-default/rep1",
        "backend-mpi/operation-allreduce/nodes1-rpn2/mpi-allreduce-ring/nccl-default/rep1",
        "backend-mpi/operation-alltoall/nodes1-rpn2/mpi-default/nccl-default/rep1",
        "backend-mpi/operation-alltoall/nodes1-rpn2/mpi-allreduce-ring/nccl-default/rep1",
        "backend-gloo/operation-allreduce/nodes1-rpn2/mpi-default/nccl-default/rep1",
        "backend-gloo/operation-allreduce/nodes1-rpn2/mpi-allreduce-ring/nccl-default/rep1",
        "backend-gloo/operation-alltoall/nodes1-rpn2/mpi-default/nccl-default/rep1",
        "backend-gloo/operation-alltoall/nodes1-rpn2/mpi-allreduce-ring/nccl-default/rep1",
    ],
    "weak": [
        f"max_bytes{size}/nodes{nodes}-rpn1/mpi-default/nccl-default/rep1"
        for size in (1024, 2048, 4096)
        for nodes in (1, 2, 4)
    ],
}


def load(**studies):
    config = copy.deepcopy(CONFIG)
    for name, keys in studies.items():
        config["studies"][name].update(keys)
    return sweep.load(config)


def ids(loaded, study):
    return [point.id for point in loaded.points_of(study)]


def problems(**studies):
    with pytest.raises(SweepError) as error:
        load(**studies)
    return error.value.problems


def test_without_exclude_or_zip_the_ids_are_25b3435s():
    loaded = load()
    assert {study: ids(loaded, study) for study in IDS_AT_25B3435} == IDS_AT_25B3435
    assert loaded.excluded == {}


def test_an_excluded_combination_is_not_planned_and_the_rest_keep_their_ids():
    # gloo never calls MPI's allreduce: the allreduce algorithm's flag set means nothing for it.
    loaded = load(coll={"exclude": [{"backend": "gloo", "mpi_flags": ["allreduce-ring"]}]})
    kept = ids(loaded, "coll")
    assert kept == [i for i in IDS_AT_25B3435["coll"] if not ("gloo" in i and "allreduce-ring" in i)]
    assert len(kept) == 6 and loaded.excluded == {"coll": 2}


def test_a_point_must_match_every_key_of_an_entry_and_a_list_matches_any_of_its_values():
    entries = [
        {"operation": "alltoall", "mpi_flags": "allreduce-ring"},
        {"backend": ["gloo"], "operation": "allreduce"},
    ]
    kept = ids(load(coll={"exclude": entries}), "coll")
    assert kept == [
        "backend-mpi/operation-allreduce/nodes1-rpn2/mpi-default/nccl-default/rep1",
        "backend-mpi/operation-allreduce/nodes1-rpn2/mpi-allreduce-ring/nccl-default/rep1",
        "backend-mpi/operation-alltoall/nodes1-rpn2/mpi-default/nccl-default/rep1",
        "backend-gloo/operation-alltoall/nodes1-rpn2/mpi-default/nccl-default/rep1",
    ]


def test_zipped_axes_vary_together_value_by_value_with_25b3435s_ids():
    # A hand-made weak scaling: the message grows with the node count.
    loaded = load(weak={"zip": [["nodes", "max_bytes"]]})
    assert ids(loaded, "weak") == [
        "max_bytes1024/nodes1-rpn1/mpi-default/nccl-default/rep1",
        "max_bytes2048/nodes2-rpn1/mpi-default/nccl-default/rep1",
        "max_bytes4096/nodes4-rpn1/mpi-default/nccl-default/rep1",
    ]
    assert set(ids(loaded, "weak")) <= set(IDS_AT_25B3435["weak"]) and loaded.excluded == {"weak": 6}


def test_repeats_count_in_the_points_left_out():
    loaded = load(weak={"zip": [["nodes", "max_bytes"]], "repeats": 3})
    assert len(loaded.points_of("weak")) == 9 and loaded.excluded == {"weak": 18}


def test_an_unknown_axis_or_value_is_one_line_naming_the_key():
    found = problems(coll={"exclude": [{"backnd": "gloo"}, {"backend": ["gloo", "nccl"]}, {"mpi_flags": "tcp"}]})
    assert found == [
        "studies.coll.exclude[0].backnd: unknown axis 'backnd'; the study's axes: nodes, ranks_per_node, mpi_flags, "
        "nccl_env, hyperthreads, binding, mapping, backend, operation; did you mean 'backend'?",
        "studies.coll.exclude[1].backend: unknown value 'nccl'; backend takes: mpi, gloo",
        "studies.coll.exclude[2].mpi_flags: unknown value 'tcp'; mpi_flags takes: default, allreduce-ring",
    ]


def test_a_zip_of_unequal_lengths_or_unknown_axes_is_one_line_naming_the_key():
    assert problems(weak={"zip": [["nodes", "ranks_per_node"]]}) == [
        "studies.weak.zip[0]: zipped axes vary together value by value, so need as many values each; "
        "nodes has 3, ranks_per_node has 1"
    ]
    assert problems(weak={"zip": [["nodes", "N"]]})[0].startswith("studies.weak.zip[0]: unknown axis 'N'")
    twice = problems(weak={"zip": [["nodes", "max_bytes"], ["max_bytes", "nodes"]]})
    assert twice[0] == "studies.weak.zip[1]: axis 'max_bytes' is zipped twice; an axis may be in one zip group once"


def test_the_schema_refuses_a_zip_of_one_axis():
    (line,) = problems(weak={"zip": [["nodes"]]})
    assert line.startswith("studies.weak.zip[0]")


def test_the_summary_line_counts_the_points_left_out():
    survey = Survey()
    survey.points.update({"coll": 6})
    line = summary_line(survey, excluded=2)
    assert line.startswith("scalestudy: 6 points (coll 6; 2 left out by exclude/zip); 0 run jobs to submit")


def test_the_shipped_collectives_study_leaves_out_the_allreduce_algorithms_where_they_mean_nothing():
    from scalestudy.config.files import read_yaml
    from scalestudy.model.paths import DEFAULT_SWEEP, REPO_ROOT

    loaded = sweep.load(read_yaml(REPO_ROOT / DEFAULT_SWEEP))
    flagged = [p for p in loaded.points_of("collectives") if p.mpi_flag_set.startswith("allreduce-")]
    assert flagged and all(p.params["backend"] == "mpi" and p.params["operation"] == "allreduce" for p in flagged)
    assert loaded.excluded["collectives"] == 18
