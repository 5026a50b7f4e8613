"""The sweep is read strictly, and every message tells the truth: unknown keys (with the
key meant), keys given twice in a file, walltimes of no time, results in a system
directory, what this machine has (one node, its GPUs), a PBS project, and hints that
are the rules' own."""

import os

import pytest
import yaml
from scalestudy.apps.registry import APPS
from scalestudy.config import clusters, files, study, sweep
from scalestudy.model.errors import SweepError
from scalestudy.scheduler import scheduler_for
from scalestudy.scheduler.site import load_study


def pingpong(**study_keys):
    """One ping-pong study on the local machine (2 ranks of its one node)."""
    return {
        "cluster": "local",
        "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], **study_keys}},
    }


def problems_of(config, **load_args):
    with pytest.raises(SweepError) as raised:
        study.load(config, **load_args)
    return raised.value.problems


@pytest.fixture
def two_cores_no_gpu(monkeypatch):
    """This machine as CI's: 2 cores, no GPU."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr(clusters, "detected_gpus", lambda: 0, raising=False)


# ---------------------------------------------------------------- unknown keys


STUDY_KEYS = (
    "app, scaling, nodes, ranks_per_node, gpus_per_node, threads_per_rank, mpi_flags, nccl_env, hyperthreads, "
    "binding, mapping, repeats, exclude, zip, walltime, estimator, budget_su, efficiency_threshold, predict_up_to, "
    "queue, pack, command, figures, mpi, primary, params"
)
TOP_KEYS = (
    "cluster, results_dir, retry_failed, budget_su_total, order_seed, partial, predict_from, compare_baseline, assets, "
    "mpi_flag_sets, "
    "nccl_env_sets, studies"
)


def test_an_unknown_top_level_key_is_refused_with_the_key_meant():
    assert problems_of({**pingpong(), "clsuter": "gadi"}) == [
        f"top level: unknown key 'clsuter'; did you mean 'cluster'? allowed: {TOP_KEYS}"
    ]
    assert problems_of({**pingpong(), "mpi_flag_set": {"tcp": {"btl": "self,tcp"}}}) == [
        f"top level: unknown key 'mpi_flag_set'; did you mean 'mpi_flag_sets'? allowed: {TOP_KEYS}"
    ]
    assert problems_of({**pingpong(), "verbose": True}) == [f"top level: unknown key 'verbose'; allowed: {TOP_KEYS}"]


def test_an_unknown_study_key_is_one_line_not_jsonschemas():
    assert problems_of(pingpong(repeat=3)) == [
        f"studies.pp: unknown key 'repeat'; did you mean 'repeats'? allowed: {STUDY_KEYS}"
    ]


def test_unknown_asset_keys_are_refused():
    assert problems_of({**pingpong(), "assets": {"litgpt_tiny": {"n_layers": 2}}}) == [
        "assets.litgpt_tiny.n_layers: unknown key; did you mean 'n_layer'? allowed: n_layer, n_head, n_embd, "
        "intermediate_size, vocab_size, block_size, samples, seed"
    ]
    assert problems_of({**pingpong(), "assets": {"litgpt_tiny": {"n_layer": 0}}}) == [
        "assets.litgpt_tiny.n_layer: 0 is not allowed; use a whole number, at least 1"
    ]
    assert problems_of({**pingpong(), "assets": {"litgpt": {}}}) == [
        "assets: unknown key 'litgpt'; did you mean 'litgpt_tiny'? allowed: litgpt_tiny"
    ]


def test_each_assets_entry_is_an_apps_and_checked_by_it():
    # The schema lists the entries `assets:` may have; each is the assets_key of the app whose
    # made inputs it sets, and that app checks it (the study loader names no app).
    assert set(sweep.schema()["properties"]["assets"]["properties"]) == {
        app.assets_key for app in APPS.values() if app.assets_key is not None
    }
    assert APPS["litgpt"].assets_problems({"seed": -1}) == [".seed: -1 is not allowed; use a whole number, at least 0"]


def test_an_unknown_app_param_names_the_one_meant():
    assert problems_of(pingpong(params={"max_byte": 64})) == [
        "studies.pp.params.max_byte: unknown parameter for app 'pingpong'; did you mean 'max_bytes'? "
        "allowed: iterations, max_bytes, min_bytes, warmup"
    ]


def test_an_unknown_cluster_names_the_one_meant():
    (problem,) = problems_of({**pingpong(), "cluster": "gadii"})
    assert problem.startswith("cluster: unknown cluster 'gadii'; did you mean 'gadi'? defined in ")


def test_flag_set_keys_stay_free_form_mca_names():
    config = {**pingpong(mpi_flags=["tcp"]), "mpi_flag_sets": {"tcp": {"btl": "self,tcp", "btl_tcp_if_x": 1}}}
    assert study.load(config).points


# ---------------------------------------------------------------- keys given twice, YAML mistakes


DUPLICATED = """\
cluster: local
studies:
  pp:
    app: pingpong
    repeats: 3
    nodes: [1]
    ranks_per_node: [2]
    repeats: 5
"""


def test_a_key_given_twice_in_a_config_file_is_refused_with_file_and_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text(DUPLICATED)
    config = yaml.safe_load(DUPLICATED)  # what Snakemake made of it: repeats 5, silently
    assert config["studies"]["pp"]["repeats"] == 5
    assert problems_of(config, files=[tmp_path / "my.yaml"]) == [
        "my.yaml:8: studies.pp.repeats is given twice (first at line 5); YAML would keep only the last: remove one"
    ]
    with pytest.raises(SweepError, match=r"^my.yaml:8: studies.pp.repeats is given twice"):
        files.load_files("my.yaml")


def test_merge_keys_may_override_and_json_duplicates_are_refused_too(tmp_path):
    (tmp_path / "anchors.yaml").write_text(
        "base: &base {repeats: 2, nodes: [1]}\nstudies:\n  a: {<<: *base, repeats: 3}\n  b: *base\n"
    )
    assert files.file_problems([tmp_path / "anchors.yaml"]) == []
    (tmp_path / "twice.json").write_text('{"cluster": "local", "cluster": "gadi"}')
    assert files.file_problems([tmp_path / "twice.json"]) == [
        f"{tmp_path / 'twice.json'}: 'cluster' is given twice in one object; JSON readers keep only the last"
    ]


def test_a_yaml_mistake_names_file_line_and_column(tmp_path):
    (tmp_path / "bad.yaml").write_text("studies:\n  pp:\n    app: pingpong\n   nodes: [1]\n")
    assert files.file_problems([tmp_path / "bad.yaml"]) == [
        f"{tmp_path / 'bad.yaml'}:4:4: not valid YAML: expected <block end>, but found '<block mapping start>' "
        "(while parsing a block mapping at line 2)"
    ]
    assert files.file_problems([tmp_path / "report"]) == [f"{tmp_path / 'report'}: no such file"]


def test_a_cluster_file_is_read_strictly_too(tmp_path, monkeypatch):
    (tmp_path / "twice.yaml").write_text("name: twice\ncores_per_node: 48\ncores_per_node: 4\n")
    monkeypatch.setenv("SCALESTUDY_CLUSTERS_DIR", str(tmp_path))
    with pytest.raises(SweepError) as raised:
        clusters.load("twice")
    assert raised.value.problems == [
        f"{tmp_path / 'twice.yaml'}:3: cores_per_node is given twice (first at line 2); "
        "YAML would keep only the last: remove one"
    ]


def test_a_sites_own_cluster_file_is_named_by_its_path_not_the_checkouts(tmp_path, monkeypatch):
    # A site's queues without the shipped GPU queue: the message names the file the user edits.
    (tmp_path / "gadi.yaml").write_text(
        "name: gadi\ncores_per_node: 2\ndefault_gpu_queue: gpuvolta\nqueues:\n  normal: {}\n"
    )
    monkeypatch.setenv("SCALESTUDY_CLUSTERS_DIR", str(tmp_path))
    with pytest.raises(SweepError) as raised:
        clusters.load("gadi")
    assert raised.value.problems == [
        f"{tmp_path / 'gadi.yaml'}: default_gpu_queue 'gpuvolta' is not among queues: normal"
    ]
    monkeypatch.delenv("SCALESTUDY_CLUSTERS_DIR")
    assert clusters.cluster_file("gadi") == "config/clusters/gadi.yaml"


# ---------------------------------------------------------------- walltime, results_dir


def test_a_walltime_of_no_time_is_refused():
    assert problems_of(pingpong(walltime="00:00:00")) == [
        "studies.pp.walltime: '00:00:00' is not allowed; use hours:minutes:seconds above zero, in quotes, "
        'e.g. "01:30:00" (minutes and seconds 00-59; YAML reads an unquoted 1:30:00 as the number 5400)'
    ]
    assert study.load(pingpong(walltime="0:00:01")).points[0].walltime_seconds == 1


@pytest.mark.parametrize("results_dir", ["/", "/etc", "/usr/local/results", "/root", "/var/lib/x", "/proc"])
def test_results_in_the_root_or_a_system_directory_are_refused(results_dir):
    (problem,) = problems_of({**pingpong(), "results_dir": results_dir})
    assert problem.startswith(f"results_dir: {results_dir!r} is ")
    assert problem.endswith("; give results a directory of their own, e.g. results or /scratch/ab12/you/results")


def test_results_dir_is_resolved_through_dots_and_links(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    upward = os.path.relpath("/etc", tmp_path)  # ../../../etc
    assert problems_of({**pingpong(), "results_dir": upward}) == [
        f"results_dir: {upward!r} (that is /etc) is a system directory; give results a directory of their own, "
        "e.g. results or /scratch/ab12/you/results"
    ]
    (tmp_path / "to-root").symlink_to("/")
    (problem,) = problems_of({**pingpong(), "results_dir": "to-root"})
    assert problem.startswith("results_dir: 'to-root' (that is /) is the root directory;")
    assert problems_of({**pingpong(), "results_dir": ""}) == ["results_dir: '' is empty; give at least 1"]
    assert problems_of({**pingpong(), "results_dir": "/scratch/ab12/$USER/results"}) == [
        "results_dir: '/scratch/ab12/$USER/results': nothing expands ~ or $VARIABLES here (a folder of that very "
        "name would be made); write the path out, e.g. /scratch/ab12/you/results"
    ]
    for fine in ("results", str(tmp_path / "r"), "/var/tmp/r", "/home/you/scalestudy/results"):
        assert study.load({**pingpong(), "results_dir": fine}).layout.results == fine


# ---------------------------------------------------------------- this machine


def test_the_local_machine_is_one_node(two_cores_no_gpu):
    assert problems_of(pingpong(nodes=[1, 2])) == [
        "studies.pp.nodes: 2 nodes, but local is one machine (config/clusters/local.yaml nodes: 1); use nodes: [1]"
    ]
    assert problems_of(pingpong(nodes=[1_000_000_000])) == [
        "studies.pp.nodes: 1000000000 nodes, but local is one machine (config/clusters/local.yaml nodes: 1); "
        "use nodes: [1]"
    ]
    assert problems_of(pingpong(nodes=["1e9"])) == ["studies.pp.nodes[0]: '1e9' is not an integer"]


def test_gpus_this_machine_lacks_and_queues_it_lacks_are_refused(two_cores_no_gpu):
    config = pingpong(gpus_per_node=[2])
    del config["studies"]["pp"]["ranks_per_node"]
    assert problems_of(config) == [
        "studies.pp.gpus_per_node: 2 GPUs per node but local nodes have 0 (config/clusters/local.yaml)"
    ]
    assert problems_of(pingpong(queue="gpuvolta")) == [
        "studies.pp.queue: 'gpuvolta', but local has no queues (config/clusters/local.yaml); remove queue"
    ]


def test_more_ranks_than_cores_is_the_local_studys_choice(two_cores_no_gpu):
    assert len(study.load(pingpong(ranks_per_node=[2, 4])).points) == 2


def test_gpus_are_counted_from_the_driver_and_narrowed_by_cuda_visible_devices(tmp_path):
    gpus = tmp_path / "gpus"
    for bus in ("0000:17:00.0", "0000:65:00.0"):
        (gpus / bus).mkdir(parents=True)
    assert clusters.detected_gpus({}, str(gpus)) == 2
    assert clusters.detected_gpus({"CUDA_VISIBLE_DEVICES": "1"}, str(gpus)) == 1
    assert clusters.detected_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, str(gpus)) == 0
    assert clusters.detected_gpus({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, str(gpus)) == 2
    assert clusters.detected_gpus({}, str(tmp_path / "no-driver")) == 0


# ---------------------------------------------------------------- a PBS project


def test_a_pbs_cluster_without_a_project_stops_at_load(monkeypatch):
    """The project is PBS Pro's to ask for (its backend's cluster_problems, scheduler.site.load_study)."""
    monkeypatch.delenv("PROJECT", raising=False)
    config = {**pingpong(), "cluster": "gadi"}
    assert problems_of(config, site=scheduler_for) == [
        "config/clusters/gadi.yaml project: not set and $PROJECT is empty; gadi charges every job to a project "
        "(qsub -P): export PROJECT=<your project code> or set project: in that file"
    ]
    assert load_study({**config, "partial": "true"}).points  # a partial report submits nothing
    assert load_study(config, submits=False).points  # nor does a batch job, whose environment may lack it
    monkeypatch.setenv("PROJECT", "ab12")
    assert load_study(config).points
    monkeypatch.delenv("PROJECT")
    assert load_study({**config, "cluster": "slurm"}).points  # Slurm charges the user's default account


# ---------------------------------------------------------------- messages that tell the truth


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            pingpong(walltime="25:00"),
            "studies.pp.walltime: '25:00' is not allowed; use hours:minutes:seconds above zero, in quotes",
        ),
        (pingpong(walltime=1500), "studies.pp.walltime: 1500 is not a string; use hours:minutes:seconds"),
        (
            {**pingpong(), "mpi_flag_sets": {"x": {"btl.tcp": 1}}},
            "mpi_flag_sets.x: name 'btl.tcp' is not allowed; an MCA parameter (or, in an MPICH set, environment "
            "variable) name is letters, digits and '_', e.g. btl_tcp_if_include",
        ),
        (
            {**pingpong(), "nccl_env_sets": {"x": {"LD_PRELOAD": "/lib/x.so"}}},
            "nccl_env_sets.x: name 'LD_PRELOAD' is not allowed; an NCCL set holds NCCL variables only: NCCL_ then "
            "upper-case letters, digits or '_', e.g. NCCL_IB_DISABLE",
        ),
        (
            pingpong(params={"max-bytes": 64}),
            "studies.pp.params: name 'max-bytes' is not allowed; a parameter name is letters, digits and '_', "
            "not starting with a digit, e.g. max_bytes",
        ),
        (pingpong(params={"iterations": "many"}), "studies.pp.params.iterations: 'many' is not an integer"),
        (pingpong(params={"iterations": True}), "studies.pp.params.iterations: True is not an integer"),
        (
            pingpong(params={"iterations": [[1]]}),
            "studies.pp.params.iterations: [[1]] is not allowed; a param is a string, number or true/false, "
            "or a non-empty list of them (an axis)",
        ),
        ({**pingpong(), "studies": {}}, "studies: {} is empty; give at least 1"),
        ({"studies": {"pp": {"app": "pingpong"}}}, "studies.pp: missing key 'nodes' (required: app, nodes)"),
        ({**pingpong(), "retry_failed": "yes"}, "retry_failed: 'yes' is not allowed; allowed: true, false"),
        ({**pingpong(), "mpi_flag_sets": {"x": 5}}, "mpi_flag_sets.x: 5 is not keys (key: value) or empty"),
        (pingpong(threads_per_rank=0), "studies.pp.threads_per_rank: 0 is not allowed; the least is 1"),
    ],
)
def test_each_message_says_what_is_wrong_and_what_is_allowed(config, expected):
    problems = problems_of(config)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_every_pattern_in_the_schema_carries_its_own_hint():
    def patterns(node, where):
        if isinstance(node, dict):
            if "pattern" in node:
                yield where, node
            for key, value in node.items():
                yield from patterns(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from patterns(value, f"{where}[{i}]")

    found = list(patterns(sweep.schema(), "schema"))
    assert len(found) == 7
    assert [where for where, node in found if not node.get(sweep.HINT)] == []
