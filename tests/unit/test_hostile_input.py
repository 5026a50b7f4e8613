"""Hostile input, as properties over generated values (hypothesis): no sweep value is ever
executed by a shell, each value reaches the launcher as one argument, and names with
shell metacharacters or path separators are refused before anything runs. Then, a case per
kind of mistake that used to get past the load (issue 23): each now stops there in one line
naming the key, what is wrong and what is allowed."""

import re
from pathlib import Path

import pytest
from hostile import SHELL_BITS
from hypothesis import given, settings
from hypothesis import strategies as st
from scalestudy.config.study import load
from scalestudy.model.errors import SweepError

VALID_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def sweep_with(study="s", mpi_set="default", nccl_set="default", axis_value=2):
    return {
        "mpi_flag_sets": {mpi_set: {}},
        "nccl_env_sets": {nccl_set: {}},
        "studies": {
            study: {"app": "pingpong", "nodes": [1], "ranks_per_node": [2], "mpi_flags": [mpi_set],
                    "nccl_env": [nccl_set], "params": {"iterations": [axis_value, 10**6]}}
        },
    }  # fmt: skip


NAMES = st.one_of(
    st.text(min_size=1, max_size=12), st.from_regex(VALID_NAME, fullmatch=True).filter(lambda s: len(s) < 60)
)


@settings(max_examples=150, deadline=None)
@given(name=NAMES, where=st.sampled_from(["study", "mpi_set", "nccl_set"]))
def test_names_are_refused_unless_they_are_safe_path_segments(name, where):
    safe = bool(VALID_NAME.fullmatch(name)) and len(name) <= 64
    try:
        loaded = load(sweep_with(**{where: name}))
    except SweepError as error:
        assert not safe, error.problems
        assert any(repr(name) in problem or "name" in problem for problem in error.problems)
        return
    assert safe
    for p in loaded.points:
        assert all(VALID_NAME.match(part) for part in p.id.split("/"))


SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(st.text(min_size=1, max_size=12), SHELL_BITS))
def test_axis_values_that_cannot_name_a_directory_are_refused(value):
    params = {"method": "lora", "checkpoint_dir": "/ckpt", "max_steps": 1, "global_batch_size": 8,
              "micro_batch_size": 1, "data_path": [value, "other.json"]}  # fmt: skip
    config = {"studies": {"s": {"app": "litgpt", "nodes": [1], "ranks_per_node": [1], "params": params}}}
    try:
        loaded = load(config)
    except SweepError as error:
        assert not SAFE_SEGMENT.fullmatch(value) or value == "other.json", error.problems
        assert any(p.startswith("studies.s.params.data_path") for p in error.problems)
        return
    assert SAFE_SEGMENT.fullmatch(value)
    assert {p.id.split("/")[0] for p in loaded.points} == {f"data_path-{value}", "data_path-other.json"}


def refusals(config):
    with pytest.raises(SweepError) as raised:
        load(config)
    return raised.value.problems


# ---------------------------------------------------------------- app parameters that cannot work together


def torch_parallel(ranks=2, **params):
    return {"cluster": "local", "studies": {"t": {"app": "torch-parallel", "nodes": [1], "ranks_per_node": [ranks],
                                                  "params": {"model": "gpt2", **params}}}}  # fmt: skip


def test_attention_heads_must_divide_the_hidden_size():
    # The rank program's attention reshapes width into heads x (width // heads): 64 / 3 fails
    # in the job, and 12 / 8 silently trains 12 heads of one value each.
    assert refusals(torch_parallel(width=64, heads=3)) == [
        "studies.t.params.heads: 3 does not divide width 64; allowed: a divisor of width (1, 2, 4, 8, 16, 32, 64)"
    ]
    assert refusals(torch_parallel(width=12, heads=8))[0].startswith("studies.t.params.heads: 8 does not divide")
    # heads means nothing to a model without attention: not checked there.
    assert load(torch_parallel(model="cnn", heads=3)).points


def test_an_image_family_is_no_deeper_than_its_image_can_be_halved():
    assert refusals(torch_parallel(model="cnn", depth=6)) == [
        "studies.t.params.depth: cnn halves its image's side at every layer, so depth 6 leaves nothing of the "
        "32x32 image; allowed: 1 to 5"
    ]
    assert load(torch_parallel(model="autoencoder", depth=5)).points


def test_converging_on_fewer_samples_than_one_global_batch_is_refused():
    assert refusals(torch_parallel(mode="converge", samples=16, batch_size=16)) == [
        "studies.t.params.samples: 16 is less than one global batch at 2 ranks (batch_size 16 x 2 replicas = 32): "
        "no step would run; allowed: at least 32"
    ]
    # A pipeline is one replica: one batch of samples is enough.
    assert load(torch_parallel(mode="converge", samples=16, batch_size=16, strategy="pipeline")).points


def test_an_integer_parameter_outside_its_allowed_values_is_one_line_not_a_type_error():
    assert refusals(torch_parallel(strategy="fsdp", zero_stage=4)) == [
        "studies.t.params.zero_stage: 4 is not allowed; allowed: 1, 2, 3"
    ]


def with_tiny_assets(**settings):
    return {"cluster": "local", "assets": {"litgpt_tiny": settings},
            "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2]}}}  # fmt: skip


def test_litgpt_stand_in_shapes_litgpt_rejects_are_refused():
    assert refusals(with_tiny_assets(n_embd=64, n_head=3)) == [
        "assets.litgpt_tiny.n_head: 3 does not divide n_embd 64 (LitGPT splits the embedding into heads); "
        "allowed: a divisor of n_embd (1, 2, 4, 8, 16, 32, 64)"
    ]
    assert refusals(with_tiny_assets(vocab_size=100)) == [
        "assets.litgpt_tiny.vocab_size: 100 is less than the byte-level tokenizer's 256 bytes and 3 special "
        "tokens; allowed: at least 259"
    ]


def test_the_smallest_vocabulary_is_the_tokenizer_librarys_alphabet_and_special_tokens():
    # The reference is the tokenizers library's own byte alphabet, not a number written here.
    from scalestudy.apps.litgpt import assets as litgpt_assets
    from tokenizers import pre_tokenizers

    alphabet = len(pre_tokenizers.ByteLevel.alphabet())
    assert litgpt_assets.MIN_VOCAB == alphabet + len(litgpt_assets.SPECIAL_TOKENS)


# ---------------------------------------------------------------- paths and patterns


def pingpong_at(results_dir, **settings):
    return {"cluster": "local", "results_dir": str(results_dir), **settings,
            "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2]}}}  # fmt: skip


def baseline_refusal(results_dir, baseline):
    """The compare target's refusal of `--config compare_baseline=BASELINE` (the typed setting)."""
    from scalestudy.planning import tables
    from scalestudy.planning.plan import load_plan
    from scalestudy.presentation.comparison import check_side

    plan = load_plan(pingpong_at(results_dir, compare_baseline=str(baseline)))
    with pytest.raises(SweepError) as raised:
        tables.compare_baseline(plan, check_side)
    return raised.value.problems


def test_a_compare_baseline_that_is_no_results_is_refused_before_the_dag(tmp_path):
    results = tmp_path / "results"
    hint = "give a results directory (with <study>/runs.csv) or a published record (.csv)"
    assert baseline_refusal(results, tmp_path / "gone") == [f"compare_baseline: {tmp_path / 'gone'}: not found; {hint}"]
    (tmp_path / "notes.txt").write_text("hello\n")
    assert baseline_refusal(results, tmp_path / "notes.txt") == [
        f"compare_baseline: {tmp_path / 'notes.txt'}: not a results directory nor a .csv file; {hint}"
    ]
    (tmp_path / "empty").mkdir()
    assert baseline_refusal(results, tmp_path / "empty") == [
        f"compare_baseline: {tmp_path / 'empty'}: no runs.csv of any study (<study>/runs.csv); has the study been "
        "aggregated?"
    ]
    (tmp_path / "other/elsewhere").mkdir(parents=True)
    (tmp_path / "other/elsewhere/runs.csv").write_text("study\nelsewhere\n")
    assert baseline_refusal(results, tmp_path / "other") == [
        f"compare_baseline: {tmp_path / 'other'}: no study of this sweep (it has elsewhere); allowed: results of pp"
    ]


def test_a_results_dir_that_is_a_file_or_under_one_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("")
    assert refusals(pingpong_at(tmp_path / "taken")) == [
        f"results_dir: '{tmp_path / 'taken'}' is a file, not a folder; give results a folder of their own, e.g. results"
    ]
    assert refusals(pingpong_at(tmp_path / "taken/results")) == [
        f"results_dir: '{tmp_path / 'taken/results'}' lies under {tmp_path / 'taken'}, which is a file; give results "
        "a folder of their own, e.g. results"
    ]


def test_a_pattern_does_not_pass_a_trailing_newline():
    # Python's `$` matches before a final newline; JSON Schema's (ECMA-262) does not.
    config = {"cluster": "local", "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2],
                                                     "walltime": "00:10:00\n"}}}  # fmt: skip
    assert refusals(config)[0].startswith("studies.pp.walltime: '00:10:00\\n' is not allowed; use hours:minutes")
    config["studies"]["pp"]["walltime"] = "00:10:00"
    config["studies"]["pp\n"] = config["studies"].pop("pp")
    assert refusals(config)[0].startswith("studies: name 'pp\\n' is not allowed")


def test_a_typo_under_the_assets_is_a_missing_input_not_a_made_one(tmp_path):
    # {results_dir}/assets/... that no rule makes: the documented warning (a real run stops),
    # not a DAG edge that Snakemake answers with MissingInputException.
    from scalestudy.planning.plan import load_plan

    params = {"method": "lora", "checkpoint_dir": "{results_dir}/assets/litgpt-tiny/checkpoint",
              "data_path": "{results_dir}/assets/litgpt-tiny/alpaca.jsn", "max_steps": 1, "global_batch_size": 8,
              "micro_batch_size": 1}  # fmt: skip
    config = {"cluster": "local", "results_dir": str(tmp_path),
              "studies": {"lg": {"app": "litgpt", "nodes": [1], "ranks_per_node": [1], "params": params}}}  # fmt: skip
    plan = load_plan(config)
    assert plan.missing_inputs == [
        f"studies.lg.params.data_path: {tmp_path}/assets/litgpt-tiny/alpaca.jsn does not exist"
    ]
    point = plan.study.points[0]
    assert plan.point_made_inputs(point) == [f"{tmp_path}/assets/litgpt-tiny/checkpoint/lit_model.pth"]


# ---------------------------------------------------------------- sweeps are data


def test_a_yte_template_is_refused_sweeps_are_data(tmp_path):
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text("__use_yte__: true\ncluster: local\n")
    with pytest.raises(SweepError) as raised:
        load({"cluster": "local"}, files=[sweep_file])
    assert raised.value.problems == [
        f"{sweep_file}: __use_yte__: scalestudy reads sweeps as data, not as YTE templates (which run Python while "
        "the file is read); remove __use_yte__ and write the values out"
    ]


# ---------------------------------------------------------------- the command lines


def command(capsys, *argv):
    from scalestudy.__main__ import main

    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.err.strip().splitlines()


RECORD_HINT = "a published record is a CSV with the columns nodes, cores_per_node, steps_per_s, walltime_used"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "is not text (binary?)"),
        (b"", "is empty"),
        (b"nodes,cores_per_node,steps_per_s,walltime_used\n", "has a header but no runs"),
        (b"nodes,cores\n1,2\n", "no column cores_per_node, steps_per_s, walltime_used"),
        (b"nodes,cores_per_node,steps_per_s,walltime_used\n1,4,fast,00:01:00\n",
         "run 1: steps_per_s 'fast' is not a positive number"),
        (b"nodes,cores_per_node,steps_per_s,walltime_used\n1,4,3.5,1h\n",
         "run 1: walltime_used not a time of the form HH:MM:SS, MM:SS or SS: '1h'"),
    ],
)  # fmt: skip
def test_published_answers_a_bad_record_in_one_line(tmp_path, capsys, content, problem):
    record = tmp_path / "record.csv"
    record.write_bytes(content)
    status, lines = command(capsys, "published", str(record), "--out", str(tmp_path / "out"))
    assert (status, lines) == (2, [f"python -m scalestudy published: {record}: {problem}; {RECORD_HINT}"])


GOOD_RECORD = "nodes,cores_per_node,steps_per_s,walltime_used\n1,4,3.5,00:01:00\n2,4,6.5,00:00:40\n"


def test_published_and_compare_answer_a_folder_or_an_out_that_is_a_file_in_one_line(tmp_path, capsys):
    record = tmp_path / "record.csv"
    record.write_text(GOOD_RECORD)
    (tmp_path / "afile").write_text("")
    assert command(capsys, "published", str(tmp_path), "--out", str(tmp_path / "o")) == (
        2, [f"python -m scalestudy published: {tmp_path}: is a directory, not a record; {RECORD_HINT}"]
    )  # fmt: skip
    for out, why in ((tmp_path / "afile", "is a file, not a folder"),
                     (tmp_path / "afile/sub", f"lies under {tmp_path / 'afile'}, which is a file")):  # fmt: skip
        for argv in (("published", str(record)), ("compare", str(record), str(tmp_path))):
            assert command(capsys, *argv, "--out", str(out)) == (
                2, [f"python -m scalestudy {argv[0]}: --out {out}: {why}; give a folder (made where missing)"]
            )  # fmt: skip


def test_compare_of_results_with_no_study_in_common_is_an_error(tmp_path, capsys):
    for side, study in (("base", "one"), ("cand", "two")):
        (tmp_path / side / study).mkdir(parents=True)
        (tmp_path / side / study / "runs.csv").write_text(f"study,status\n{study},failed\n")
    status, lines = command(capsys, "compare", str(tmp_path / "base"), str(tmp_path / "cand"), "--out",
                            str(tmp_path / "out"))  # fmt: skip
    assert status == 2 and lines == [
        "python -m scalestudy compare: no study in common: the baseline has one, the candidate two; compare results "
        "of the same studies (a published record stands for the study --study names, else the one its file is "
        "named after)"
    ]
    (tmp_path / "cand/two/runs.csv").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "cand/one").mkdir()
    (tmp_path / "cand/one/runs.csv").write_bytes(b"\xff\xfe\x00garbage")
    status, lines = command(capsys, "compare", str(tmp_path / "base"), str(tmp_path / "cand"), "--out",
                            str(tmp_path / "out"))  # fmt: skip
    assert status == 2 and lines == [
        f"python -m scalestudy compare: {tmp_path / 'cand/one/runs.csv'}: cannot be read as a table "
        "(UnicodeDecodeError); aggregate it again"
    ]


def test_memory_takes_configfiles_as_snakemake_does_and_bad_options_in_one_line(tmp_path, capsys, repo):
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text("cluster: local\nstudies:\n  pp: {app: pingpong, nodes: [1], ranks_per_node: [2]}\n")
    two.write_text("studies:\n  pp: {repeats: 2}\n")
    status, lines = command(capsys, "memory", "--configfile", str(one), str(two))
    assert status == 0, lines  # both files read, merged: the study has its repeats
    assert command(capsys, "memory", "--configfile", str(tmp_path)) == (
        2, [f"{tmp_path}: is a directory, not a config file"]
    )  # fmt: skip
    assert command(capsys, "memory", "--no-such-option") == (
        2, ["python -m scalestudy: unrecognized arguments: --no-such-option; see python -m scalestudy --help"]
    )  # fmt: skip


def test_run_point_answers_a_point_that_is_not_json_in_one_line(tmp_path, capsys):
    status, lines = command(capsys, "run-point", "--point", "{garbage", "--walltime-s", "5", "--cluster", "local",
                            "--metrics", str(tmp_path / "metrics.json"))  # fmt: skip
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith("python -m scalestudy run-point: --point: not a point as the workflow writes it")
    assert not (tmp_path / "metrics.json").exists()


def test_the_plan_refuses_garbage_config_and_a_profile_without_a_batch_scheduler(capsys, repo, monkeypatch):
    from scalestudy.__main__ import main

    monkeypatch.chdir(repo)
    monkeypatch.setenv("PROJECT", "ab12")
    assert main(["plan", "--profile", "profiles/gadi", "--config", "garbage"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "sweep error: --config garbage: not key=value; give e.g. --config partial=true"
    ]
    assert main(["plan", "--profile", "profiles/local"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "sweep error: --profile profiles/local: its cluster 'local' has no batch scheduler (scheduler: none), so "
        "nothing is submitted; give the profile of a cluster, e.g. profiles/gadi"
    ]


# ---------------------------------------------------------------- the summary line, however Snakemake is asked


def finished_plan(tmp_path, repeats=1):
    """Ping-pong's 2 points (tcp and default flag sets), both with an ok record written."""
    import json

    from scalestudy.model.record import definition
    from scalestudy.planning.plan import load_plan
    from sweeps import sweep

    config = sweep("pingpong-tcp", results_dir=str(tmp_path / "results"))
    config["studies"]["pp"]["repeats"] = repeats
    plan = load_plan(config)
    for point in plan.study.points:
        path = Path(plan.layout.metrics(point.study, point.id))
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"status": "ok", "definition": definition(point, plan.cluster.name), "figures": {"latency_us": 1.0},
                  "resources": {"walltime_used_s": 1.0}, "started": "2026-01-01T00:00:00+00:00"}  # fmt: skip
        path.write_text(json.dumps(record))
    return load_plan(config)


def test_forced_points_are_counted_in_the_summary(tmp_path):
    from scalestudy.planning import summary
    from scalestudy.planning.plan import Forcing

    plan = finished_plan(tmp_path)
    metrics = plan.layout.metrics("pp", plan.study.points[0].id)
    forced = "forced (--forceall, --forcerun or --force)"
    assert summary.summary_lines(plan, Forcing())[0] == "scalestudy: 2 points (pp 2); 0 run jobs to submit"
    for forcing, n in (
        (Forcing(everything=True), 2),
        (Forcing(rules_or_files=frozenset({"run_pingpong"})), 2),
        (Forcing(rules_or_files=frozenset({"aggregate"})), 0),  # downstream of the points
        (Forcing(rules_or_files=frozenset({metrics})), 1),
        (Forcing(targets=frozenset({metrics}), targets_forced=True), 1),
    ):
        expected = (
            f"{n} run jobs to submit ({n} {forced}); `report` alone submits none" if n else "0 run jobs to submit"
        )
        # A point's metrics.json as the target: that point is all the line counts.
        points = "1 points (pp 1)" if forcing.targets else "2 points (pp 2)"
        assert summary.summary_lines(plan, forcing)[0] == f"scalestudy: {points}; {expected}", forcing
    # The report alone runs no point, forced or not.
    report = Forcing(targets=frozenset({"report"}), everything=True)
    only = "scalestudy: 2 points (pp 2); report from the finished runs only: 0 run jobs"
    assert summary.summary_lines(plan, report)[0] == only


def test_run_jobs_snakemake_adds_at_the_start_are_said_in_one_line(tmp_path):
    from scalestudy.planning import summary
    from scalestudy.planning.plan import Forcing

    plan = finished_plan(tmp_path)
    metrics = [plan.layout.metrics(p.study, p.id) for p in plan.study.points]
    incomplete = Forcing(incomplete=True)
    assert summary.summary_lines(plan, incomplete)[1] == (
        "scalestudy: --rerun-incomplete: points an interrupted run left incomplete run again too; the count is given "
        "when the run starts"
    )
    assert summary.rerun_line(plan, {}, incomplete) is None
    assert summary.rerun_line(plan, {metrics[0]: "Forced execution"}, incomplete) == (
        "scalestudy: Snakemake runs 1 run jobs, 1 more than counted above, for its own reasons: 1 Forced execution "
        "(--rerun-incomplete: left incomplete by an interrupted run)"
    )
    # What the summary counted is not said again.
    assert summary.rerun_line(plan, {m: "Forced execution" for m in metrics}, Forcing(everything=True)) is None


def test_the_set_of_points_is_a_param_of_the_tables(tmp_path):
    from scalestudy.planning import tables

    one, two = (
        tables.points_digest(finished_plan(tmp_path), "pp"),
        tables.points_digest(finished_plan(tmp_path, repeats=2), "pp"),
    )
    assert one.startswith("2 points, sha256 ") and two.startswith("4 points, sha256 ")
    assert tables.points_digest(finished_plan(tmp_path), "pp") == one  # the same sweep: no rebuild
