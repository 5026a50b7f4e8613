"""The sweep file: shape and meaning rejections, expansion, stable ids."""

import copy

import pytest
from scalestudy.apps.litgpt.assets import tiny_folder
from scalestudy.config import clusters, files, study
from scalestudy.model.errors import SweepError
from scalestudy.model.paths import Layout
from scalestudy.model.point import Point


def base_config():
    """A study across nodes, on a cluster of several (Slurm's example file: 48 cores, no GPUs)."""
    return {
        "cluster": "slurm",
        "mpi_flag_sets": {"default": {}, "no-ucx": {"btl": "^ucx"}},
        "nccl_env_sets": {"default": {}, "no-ib": {"NCCL_IB_DISABLE": 1}},
        "studies": {
            "litgpt-full": {
                "app": "litgpt",
                "nodes": [1, 2],
                "ranks_per_node": [2],
                "mpi_flags": ["default", "no-ucx"],
                "nccl_env": ["default", "no-ib"],
                "repeats": 3,
                "params": {
                    "method": "full",
                    "checkpoint_dir": "ckpt",
                    "data_path": "data.json",
                    "max_steps": 5,
                    "global_batch_size": 16,
                    "micro_batch_size": [1, 2],
                },
            }
        },
    }


def problems_of(config):
    with pytest.raises(SweepError) as raised:
        study.load(config)
    return raised.value.problems


def with_study(**changes):
    config = base_config()
    config["studies"]["litgpt-full"].update(changes)
    return config


def test_expansion_is_the_full_product():
    loaded = study.load(base_config())
    # nodes 2 x rpn 1 x mpi 2 x nccl 2 x micro batch 2 x repeats 3
    assert len(loaded.points) == 2 * 1 * 2 * 2 * 2 * 3
    assert len({p.id for p in loaded.points}) == len(loaded.points)


def test_point_ids_are_readable_and_stable():
    first = study.load(base_config()).points
    second = study.load(copy.deepcopy(base_config())).points
    assert [p.id for p in first] == [p.id for p in second]
    assert first[0].id == "micro_batch_size1/nodes1-rpn2/mpi-default/nccl-default/rep1"
    point = next(p for p in first if p.mpi_flag_set == "no-ucx" and p.nccl_env_set == "no-ib")
    assert point.mpi_flags == {"btl": "^ucx"}
    assert point.nccl_env == {"NCCL_IB_DISABLE": "1"}


def test_gpus_per_node_sets_one_rank_per_gpu(monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")
    config = {**with_study(gpus_per_node=[4]), "cluster": "aspire2a"}  # 4 A100 per GPU node
    del config["studies"]["litgpt-full"]["ranks_per_node"]
    point = study.load(config).points[-1]
    assert (point.ranks_per_node, point.gpus_per_node, point.ranks) == (4, 4, 8)
    assert "gpn4" in point.id


def test_unknown_set_names_the_key_path_and_the_choices():
    assert problems_of(with_study(mpi_flags=["nosuch"])) == [
        "studies.litgpt-full.mpi_flags[0]: unknown set 'nosuch'; defined: default, no-ucx"
    ]
    assert problems_of(with_study(nccl_env=["default", "nope"])) == [
        "studies.litgpt-full.nccl_env[1]: unknown set 'nope'; defined: default, no-ib"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"nodes": []}, "studies.litgpt-full.nodes: [] is empty; give at least 1"),
        ({"nodes": [0, 1]}, "studies.litgpt-full.nodes[0]: 0 is not allowed; the least is 1"),
        (
            {"repeats": 0},
            "studies.litgpt-full.repeats: 0 is not allowed; use a number of repeats, e.g. 3, or "
            "{min: 3, max: 10, ci: 5%}",
        ),
        (
            {"repeats": {"min": 2, "max": 5, "ci": "500%"}},
            "studies.litgpt-full.repeats.ci: 500% is not a CI target; use one above 0% and below 100%",
        ),
        (
            {"repeats": {"min": 2, "max": 5, "ci": "100%"}},
            "studies.litgpt-full.repeats.ci: 100% is not a CI target; use one above 0% and below 100%",
        ),
        (
            {"repeats": {"min": 2, "max": 5, "ci": "0%"}},
            "studies.litgpt-full.repeats.ci: 0% is not a CI target; use one above 0% and below 100%",
        ),
        ({"repeats": {"min": 6, "max": 5, "ci": "5%"}}, "studies.litgpt-full.repeats: min 6 is above max 5"),
        ({"repeats": {"min": 2, "max": 5}}, "studies.litgpt-full.repeats"),
        ({"ranks_per_node": [-2]}, "studies.litgpt-full.ranks_per_node[0]: -2 is not allowed; the least is 1"),
        (
            {"app": "nosuchapp"},
            "studies.litgpt-full.app: unknown app 'nosuchapp'; allowed: collectives, command, hoomd, lammps",
        ),
        ({"scaling": "diagonal"}, "studies.litgpt-full.scaling: 'diagonal' is not allowed; allowed: strong, weak"),
        ({"walltime": "1h"}, "studies.litgpt-full.walltime: '1h' is not allowed; use hours:minutes:seconds"),
        ({"gpus_per_node": [4]}, "studies.litgpt-full: give exactly one of ranks_per_node or gpus_per_node"),
        ({"budget_su": 0}, "studies.litgpt-full.budget_su: 0 is not allowed; use more than 0"),
        ({"budget_su": "lots"}, "studies.litgpt-full.budget_su: 'lots' is not a number"),
    ],
)
def test_bad_values_are_one_line_naming_the_key(change, expected):
    problems = problems_of(with_study(**change))
    assert len(problems) == 1
    assert problems[0].startswith(expected)


def test_unknown_and_missing_app_params():
    config = base_config()
    params = config["studies"]["litgpt-full"]["params"]
    params["learning_rate_typo"] = 1
    del params["method"]
    problems = problems_of(config)
    assert any(p.startswith("studies.litgpt-full.params.method: required by app 'litgpt'") for p in problems)
    assert any(p.startswith("studies.litgpt-full.params.learning_rate_typo: unknown parameter") for p in problems)


def test_bad_choice_of_app_param():
    config = base_config()
    config["studies"]["litgpt-full"]["params"]["method"] = "qlora"
    assert problems_of(config) == [
        "studies.litgpt-full.params.method: 'qlora' is not allowed; allowed: full, lora, adapter, adapter_v2"
    ]


@pytest.mark.parametrize("name", ["a;b", "x/y", "$(reboot)", "../up", "a b"])
def test_names_with_shell_or_path_characters_are_refused(name):
    config = base_config()
    config["mpi_flag_sets"][name] = {"btl": "self"}
    problems = problems_of(config)
    assert problems and all(p.startswith("mpi_flag_sets") for p in problems)


def test_global_batch_below_ranks_times_micro_batch_is_refused_with_numbers():
    config = base_config()
    config["studies"]["litgpt-full"]["params"]["global_batch_size"] = 4
    problems = problems_of(config)
    # micro batch 1: 4 >= 2 and 4 ranks: fine; micro batch 2 at 2 nodes: 4 < 4 x 2.
    assert (
        "studies.litgpt-full.params.global_batch_size: 4 is less than ranks x micro_batch_size = 4 x 2 = 8"
        in (problems[0])
    )


def test_overlay_null_removes_a_key():
    base = {"studies": {"s": {"app": "litgpt", "gpus_per_node": [4], "nodes": [2]}}}
    overlay = {"studies": {"s": {"gpus_per_node": None, "ranks_per_node": [1, 2], "nodes": [1]}}}
    merged = files.drop_nulls(files.merge(base, overlay))
    assert merged == {"studies": {"s": {"app": "litgpt", "ranks_per_node": [1, 2], "nodes": [1]}}}


def test_shipped_sweep_and_local_overlay_are_valid(repo, monkeypatch):
    monkeypatch.setenv("PROJECT", "ab12")  # the shipped sweep's ASPIRE 2A charges a project
    # The local overlay on a 2-core machine without GPUs (CI's): 2 ranks oversubscribe on purpose.
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr(clusters, "detected_gpus", lambda: 0)
    cluster_study = study.load(files.load_files(repo / "config/sweep.yaml"))
    assert {p.study for p in cluster_study.points} == {
        "litgpt-full",
        "litgpt-lora",
        "hoomd-wca",
        "hoomd-wca-weak",
        "lammps-wca",
        "torch-parallel",
        "collectives",
    }
    full = [p for p in cluster_study.points if p.study == "litgpt-full"]
    assert max(p.ranks for p in full) == 8 and {p.gpus_per_node for p in full} == {4}
    assert {p.params["max_steps"] for p in full} == {20}
    local = study.load(files.load_files(repo / "config/sweep.yaml", repo / "config/local.yaml"))
    assert (local.cluster.name, local.cluster.cores_per_node, local.cluster.gpus_per_node) == ("local", 2, 0)
    assert {(p.study, p.ranks) for p in local.points} == {
        ("litgpt-full", 1),
        ("litgpt-full", 2),
        ("litgpt-lora", 1),
        ("litgpt-lora", 2),
        ("hoomd-wca", 1),
        ("hoomd-wca", 2),
        ("hoomd-wca-weak", 1),
        ("hoomd-wca-weak", 2),
        ("lammps-wca", 1),
        ("lammps-wca", 2),
        ("lammps-placement", 2),
        ("torch-parallel", 1),
        ("torch-parallel", 2),
        ("collectives", 2),
    }
    placement = [p for p in local.points if p.study == "lammps-placement"]
    assert sorted({p.binding for p in placement}) == ["core", "default", "none"] and len(placement) == 9


def test_point_round_trips_through_json_and_walltime_is_not_part_of_it():
    point = study.load(base_config()).points[5]
    text = point.to_json()
    assert "walltime" not in text
    assert Point.from_json(text, point.walltime_seconds) == point


def test_missing_inputs_are_named_once_per_study_and_made_files_are_not_checked(tmp_path):
    config = base_config()
    params = config["studies"]["litgpt-full"]["params"]
    # The stand-in's checkpoint, made by a rule: not checked.
    params["checkpoint_dir"] = f"{tiny_folder(Layout(str(tmp_path)))}/checkpoint"
    params["data_path"] = str(tmp_path / "nowhere.json")
    config["results_dir"] = str(tmp_path)
    loaded = study.load(config)
    assert loaded.layout == Layout(str(tmp_path))
    assert loaded.missing_inputs() == [
        f"studies.litgpt-full.params.data_path: {tmp_path / 'nowhere.json'} does not exist"
    ]
    (tmp_path / "nowhere.json").write_text("[]")
    assert loaded.missing_inputs() == []


def test_partial_flag_takes_the_command_line_string_and_nothing_else():
    assert study.load({**with_study(), "partial": "true"}).points
    assert problems_of({**with_study(), "partial": "maybe"})[0].startswith(
        "partial: 'maybe' is not allowed; allowed: true, false"
    )
    assert files.is_true("true") and files.is_true(True) and not files.is_true("false") and not files.is_true(False)
