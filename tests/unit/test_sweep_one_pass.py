"""Every mistake in a sweep is reported in one pass: a study refused by one check is left out
of the next ones, which the other studies go on through; each line is the very line the
mistake gives alone (the reference: loading each mistake by itself)."""

import pytest
from scalestudy.config import study
from scalestudy.model.errors import SweepError

# On Slurm's example cluster file: 48 cores a node, no GPUs.
SOUND = {"app": "pingpong", "nodes": [1, 2], "ranks_per_node": [2]}
# One mistake each, caught by a different check: the schema's shape, the app's parameters,
# the app's pre-flight of a scale, and what the cluster would refuse.
MISTAKES = {
    "shape": {**SOUND, "walltime": "25:00"},
    "param": {**SOUND, "params": {"iteratons": 5}},
    "scale": {"app": "collectives", "nodes": [1], "ranks_per_node": [1]},
    "gpus": {**SOUND, "ranks_per_node": None, "gpus_per_node": [4]},
}


def sweep(*names, **top):
    studies = {name: {k: v for k, v in MISTAKES[name].items() if v is not None} for name in names}
    return {"cluster": "slurm", **top, "studies": {"fine": dict(SOUND), **studies}}


def problems_of(config):
    with pytest.raises(SweepError) as raised:
        study.load(config)
    return raised.value.problems


@pytest.fixture(scope="module")
def alone():
    """Each mistake's lines when it is the sweep's only one."""
    return {name: problems_of(sweep(name)) for name in MISTAKES}


def test_each_mistake_alone_is_one_line_naming_its_study(alone):
    for name, lines in alone.items():
        assert len(lines) == 1 and lines[0].startswith(f"studies.{name}."), (name, lines)


@pytest.mark.parametrize(
    "names", [("shape", "param", "gpus"), ("shape", "scale", "gpus"), ("param", "scale", "gpus"), tuple(MISTAKES)]
)
def test_mistakes_in_several_studies_are_all_reported_at_once(alone, names):
    assert problems_of(sweep(*names)) == [alone[name][0] for name in names]


def test_a_mistake_of_the_sweeps_own_keys_is_reported_with_the_studies(alone):
    unknown_cluster = problems_of({"cluster": "nosuch", "studies": {"fine": dict(SOUND)}})
    assert len(unknown_cluster) == 1 and unknown_cluster[0].startswith("cluster: unknown cluster 'nosuch'")
    assert problems_of(sweep("shape", "param", cluster="nosuch")) == [
        alone["shape"][0],
        alone["param"][0],
        unknown_cluster[0],
    ]


def test_a_study_refused_by_its_shape_is_not_checked_further(alone):
    """Later checks assume the shape sound: a study with a shape mistake and one the cluster
    would refuse is one line (its shape), never a crash or a line from a wrong reading."""
    config = sweep("gpus")
    config["studies"]["gpus"]["walltime"] = "25:00"
    assert problems_of(config) == [alone["shape"][0].replace("studies.shape.", "studies.gpus.")]


def test_a_broken_flag_set_stops_the_checks_that_read_it(alone):
    """A problem of a sweep's own key that later checks read (a flag set) is reported with the
    schema's other lines, and nothing after it is asked of the studies (as before)."""
    config = sweep("gpus", "shape", mpi_flag_sets={"x": 5})
    assert problems_of(config) == [
        "mpi_flag_sets.x: 5 is not keys (key: value) or empty",
        alone["shape"][0],
    ]
