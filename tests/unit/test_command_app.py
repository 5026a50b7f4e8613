"""app: command — a user's program declared in the sweep: its argv (params as single words,
never a shell), its figures read by regex from recorded output (scalars and curves over
message size), the load-time refusals, and the lookup the analysis reads its figures through."""

import json
import shlex

import pytest
from scalestudy.analysis.records import read_metrics
from scalestudy.analysis.scaling import scaling
from scalestudy.analysis.sizes import size_curves
from scalestudy.apps.command.app import Command
from scalestudy.apps.registry import APPS, ParseError, app_for, app_of_row
from scalestudy.config.study import load
from scalestudy.launch.command import launch_script
from scalestudy.model.errors import SweepError
from scalestudy.model.metrics import SIZE_COLUMN, SIZE_TABLE
from scalestudy.model.paths import Layout
from scalestudy.model.point import PROGRAM

LAMMPS_LOG = "lammps-2025.7.22.4-wca-2ranks.log"
MPI4PY_PINGPONG_LOG = "mpi4py-bench-pingpong-openmpi5-2ranks.log"
LOOP_TIME = r"^Loop time of ([0-9.eE+-]+) on"
# mpi4py.bench pingpong's rows: size, bandwidth | mean time ± std, samples
BENCH_TIME = r"^\s*(\d+)\s+[0-9.]+ \| ([0-9.eE+-]+)"
BENCH_BANDWIDTH = r"^\s*(\d+)\s+([0-9.]+) \|"


def config(**study):
    """A one-study command sweep on this machine; `study` keys replace the defaults."""
    base = {
        "app": "command",
        "nodes": [1],
        "ranks_per_node": [1],
        "command": "{executable} -in in.lj -var n {n}",
        "params": {"executable": "lmp", "n": [1000, 8000]},
        "figures": {"loop_time": {"regex": LOOP_TIME, "unit": "s", "better": "lower", "reduce": "last"}},
    }
    base.update(study)
    return {"cluster": "local", "results_dir": "results", "studies": {"mylj": base}}


def configured(**figures) -> Command:
    program = {"command": "x", "figures": [{"name": n, **spec} for n, spec in figures.items()]}
    program["primary"] = program["figures"][0]["name"]
    app = APPS["command"].configured(program)
    assert isinstance(app, Command)
    return app


# ---------------------------------------------------------------- figures from recorded output


@pytest.mark.parametrize(
    ("reduce", "expected"),
    [("last", 1.11869), ("max", 2.16397), ("min", 0.432966), ("mean", None)],
)
def test_a_scalar_figure_is_its_matches_reduced(data_dir, reduce, expected):
    log = (data_dir / LAMMPS_LOG).read_text()
    app = configured(loop_time={"regex": LOOP_TIME, "unit": "s", "better": "lower", "reduce": reduce})
    figures = app.parse(log, data_dir)
    loops = [2.16397, 0.44475, 0.432966, 0.86732, 0.952988, 1.11869]
    assert figures["loop_time"] == pytest.approx(expected if expected is not None else sum(loops) / len(loops))
    assert SIZE_TABLE not in figures


def test_a_curve_figure_is_one_row_per_message_size_with_its_end_as_the_runs_figure(data_dir):
    log = (data_dir / MPI4PY_PINGPONG_LOG).read_text()
    app = configured(
        time={"regex": BENCH_TIME, "unit": "s", "better": "lower", "per_size": True},
        bandwidth={"regex": BENCH_BANDWIDTH, "unit": "MB/s", "better": "higher", "per_size": True},
    )
    figures = app.parse(log, data_dir)
    table = figures[SIZE_TABLE]
    assert [row[SIZE_COLUMN] for row in table] == [2**k for k in range(21)]  # 1 B .. 1 MiB, in order
    assert table[-1] == {SIZE_COLUMN: 1048576, "time": 8.1488465e-05, "bandwidth": 12867.78}
    # Lower is better: the smallest message's; higher is better: the largest's (as the ping-pong app's).
    assert figures["time"] == table[0]["time"] and figures["bandwidth"] == 12867.78
    assert app.size_figures == ("time", "bandwidth") and app.primary_metric == "time"
    assert app.figure("bandwidth").kind == "rate" and app.figure("time").kind == "time"


def test_a_curve_row_printed_twice_is_reduced_per_size():
    app = configured(lat={"regex": r"^(\d+) ([0-9.]+)$", "unit": "us", "better": "lower", "per_size": True,
                          "reduce": "max"})  # fmt: skip
    figures = app.parse("8 1.0\n16 2.0\n8 3.0\n", None)
    assert figures[SIZE_TABLE] == [{SIZE_COLUMN: 8, "lat": 3.0}, {SIZE_COLUMN: 16, "lat": 2.0}]


def test_a_figure_that_never_matches_is_a_parse_failure_naming_figure_and_regex(data_dir):
    app = configured(
        loop_time={"regex": LOOP_TIME, "unit": "s", "better": "lower"},
        tau_day={"regex": r"^Speed: ([0-9.]+) tau/day", "unit": "tau/day", "better": "higher"},
    )
    with pytest.raises(
        ParseError, match=r"figure 'tau_day' \(regex '\^Speed: \(\[0-9\.\]\+\) tau/day'\) matched nothing"
    ):
        app.parse((data_dir / LAMMPS_LOG).read_text(), data_dir)
    curve = configured(lat={"regex": r"^(\d+) ([0-9.]+)$", "unit": "us", "better": "lower", "per_size": True})
    with pytest.raises(ParseError, match="figure 'lat'.*matched no size row"):
        curve.parse("Loop time of 1.0 on 1 procs\n", None)


def test_a_match_that_is_not_a_number_is_a_parse_failure():
    app = configured(t={"regex": r"time: (\S+)", "unit": "s", "better": "lower"})
    with pytest.raises(ParseError, match="figure 't'.*matched 'n/a', which is not a number"):
        app.parse("time: n/a\n", None)


# ---------------------------------------------------------------- the argv: single words, no shell

HOSTILE = "a b; $(touch pwned) `touch pwned2` 'q\" > out"


def test_params_are_single_argv_words_and_shell_text_stays_literal(tmp_path):
    study = load(
        config(
            command="{executable} -in 'my input.lj' -var label {label} -log {run_dir}/log.lammps -var on {on}",
            params={"executable": "lmp", "label": HOSTILE, "on": True},
        )
    )
    point = study.sweep.points[0]
    argv = app_for(point).rank_command(point, tmp_path / "run", Layout("res"))
    assert argv == ["lmp", "-in", "my input.lj", "-var", "label", HOSTILE, "-log", f"{tmp_path}/run/log.lammps",
                    "-var", "on", "true"]  # fmt: skip
    # launch.sh (what a user reruns by hand) quotes each word: a POSIX shell reads the same words
    # back (the integration test runs them through bash and mpirun).
    assert shlex.split(launch_script(argv).splitlines()[-1]) == ["exec", *argv]


def test_a_command_study_keeps_its_program_on_its_points_and_other_apps_points_do_not(tmp_path):
    point = load(config()).sweep.points[0]
    assert json.loads(point.to_json())[PROGRAM]["primary"] == "loop_time"
    assert app_of_row(point.as_record()).primary_metric == "loop_time"
    other = load({"cluster": "local", "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2]}}})
    assert PROGRAM not in json.loads(other.sweep.points[0].to_json())
    assert PROGRAM not in other.sweep.points[0].as_record()


def test_the_primary_figure_is_the_first_declared_unless_named():
    two = {
        "b_first": {"regex": r"b (\d+)", "unit": "s", "better": "lower"},
        "a_second": {"regex": r"a (\d+)", "unit": "s", "better": "lower"},
    }
    assert app_for(load(config(figures=two)).sweep.points[0]).primary_metric == "b_first"
    assert app_for(load(config(figures=two, primary="a_second")).sweep.points[0]).primary_metric == "a_second"


def test_the_study_names_the_mpi_its_program_is_built_against():
    assert app_for(load(config()).sweep.points[0]).mpi_flavour == "openmpi"
    assert app_for(load(config(mpi="mpich")).sweep.points[0]).mpi_flavour == "mpich"


# ---------------------------------------------------------------- load-time refusals, one line each


def without(key):
    study = config()["studies"]["mylj"]
    del study[key]
    return study


@pytest.mark.parametrize(
    ("study", "expected"),
    [
        (without("command"), "studies.mylj.command: missing; app 'command' runs the program the study names"),
        (without("figures"), "studies.mylj.figures: missing; declare what the output gives"),
        ({"command": "{executable} -in in.lj -var n {nn}"},
         "studies.mylj.command: placeholder {nn} has no param; did you mean 'n'? allowed: executable, n, run_dir,"),
        ({"command": "{executable} -var n {n} -v {"}, "studies.mylj.command: '{': Single '{' encountered"),
        ({"command": "{executable} -var n {n.real}"}, "studies.mylj.command: '{n.real}': placeholder {n.real} is not"),
        ({"command": "{executable} 'unclosed"}, "studies.mylj.command: \"{executable} 'unclosed\" cannot be split"),
        ({"command": "{executable}"}, "studies.mylj.params.n: not used by the command; allowed: its placeholders"),
        ({"figures": {"t": {"regex": "Loop time of ([0-9.]+", "unit": "s", "better": "lower"}}},
         "studies.mylj.figures.t.regex: 'Loop time of ([0-9.]+' does not compile (missing ), unterminated"),
        ({"figures": {"t": {"regex": "Loop time of [0-9.]+", "unit": "s", "better": "lower"}}},
         "studies.mylj.figures.t.regex: 'Loop time of [0-9.]+' has 0 capture group(s); allowed: exactly one"),
        ({"figures": {"t": {"regex": r"(\d+) (\d+)", "unit": "s", "better": "lower"}}},
         "studies.mylj.figures.t.regex: '(\\\\d+) (\\\\d+)' has 2 capture group(s); allowed: exactly one"),
        ({"figures": {"t": {"regex": r"(\d+)", "unit": "s", "better": "lower", "per_size": True}}},
         "studies.mylj.figures.t.regex: '(\\\\d+)' has 1 capture group(s); allowed: exactly two with per_size"),
        ({"figures": {"t": {"regex": r"(\d+)", "unit": "s", "better": "faster"}}},
         "studies.mylj.figures.t.better: 'faster' is not allowed; allowed: higher, lower"),
        ({"figures": {"t": {"regex": r"(\d+)", "unit": "s", "better": "lower", "reduce": "median"}}},
         "studies.mylj.figures.t.reduce: 'median' is not allowed; allowed: mean, last, max, min"),
        ({"figures": {"t": {"regex": r"(\d+)", "unit": "", "better": "lower"}}},
         "studies.mylj.figures.t.unit: '' is empty; give at least 1"),
        ({"figures": {"t": {"regex": r"(\d+)", "better": "lower"}}},
         "studies.mylj.figures.t: missing key 'unit' (required: regex, unit, better)"),
        ({"figures": {"t": {"regex": r"(\d+)", "unit": "s", "better": "lower", "colour": "red"}}},
         "studies.mylj.figures.t: unknown key 'colour'; allowed: regex, unit, better, reduce,"),
        ({"figures": {"nodes": {"regex": r"(\d+)", "unit": "s", "better": "lower"}}},
         "studies.mylj.figures.nodes: the name is a column every run's record fills already"),
        ({"primary": "loop"}, "studies.mylj.primary: 'loop' is not a figure of the study; did you mean 'loop_time'?"),
        ({"mpi": "intel"}, "studies.mylj.mpi: 'intel' is not allowed; allowed: openmpi, mpich"),
    ],
)  # fmt: skip
def test_a_bad_program_is_one_line_naming_the_key_before_anything_runs(study, expected):
    sweep = config()
    sweep["studies"]["mylj"] = {**sweep["studies"]["mylj"], **study} if "app" not in study else study
    with pytest.raises(SweepError) as error:
        load(sweep)
    assert len(error.value.problems) == 1, error.value.problems
    assert error.value.problems[0].startswith(expected), error.value.problems


def test_another_app_refuses_a_program_of_its_own():
    sweep = {"cluster": "local", "studies": {"pp": {"app": "pingpong", "nodes": [1], "ranks_per_node": [2],
                                                    "command": "osu_latency"}}}  # fmt: skip
    with pytest.raises(SweepError) as error:
        load(sweep)
    assert error.value.problems == [
        "studies.pp.command: app 'pingpong' runs its own program and declares its own figures; "
        "allowed only with app 'command'"
    ]


# ---------------------------------------------------------------- the analysis finds the study's figures


def record(point, status="ok", figures=None):
    return {"status": status, "point": point.as_record(), "figures": figures or {}, "resources": {}}


def test_the_record_check_asks_for_the_studys_primary_figure(tmp_path):
    point = load(config()).sweep.points[0]
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(record(point, figures={"loop_time": 1.5})))
    bad.write_text(json.dumps(record(point, figures={"other": 1.5})))
    assert read_metrics(good)["status"] == "ok"
    failed = read_metrics(bad)
    assert failed["status"] == "failed" and "loop_time" in failed["reason"] and str(bad) in failed["reason"]


def test_scaling_and_size_curves_read_the_studys_own_figures(data_dir):
    import pandas as pd
    from scalestudy.analysis.records import run_row

    figures = {
        "t": {"regex": BENCH_TIME, "unit": "s", "better": "lower", "per_size": True, "label": "one-way time"},
        "bw_max": {"regex": BENCH_BANDWIDTH.replace(r"(\d+)", r"\d+", 1), "unit": "MB/s", "better": "higher",
                   "reduce": "max"},
    }  # fmt: skip
    study = load(config(command="{executable} -n {n}", params={"executable": "python3", "n": 1},
                        ranks_per_node=[1, 2], figures=figures))  # fmt: skip
    log = (data_dir / MPI4PY_PINGPONG_LOG).read_text()
    rows = []
    for point in study.sweep.points:
        parsed = app_for(point).parse(log, None)
        rows.append(run_row(record(point, figures=parsed)))
    runs = pd.DataFrame(rows)
    table = scaling(runs)
    assert set(table["metric"]) == {"t", "bw_max"}
    assert table[table["primary"]]["metric"].unique().tolist() == ["t"]
    assert table[table["metric"] == "bw_max"]["kind"].unique().tolist() == ["rate"]
    curves = size_curves(runs)
    assert set(curves["metric"]) == {"t"} and set(curves["metric_label"]) == {"one-way time"}
    assert curves["size_bytes"].max() == 1048576


def test_a_changed_regex_is_a_changed_definition():
    first = load(config()).sweep.points[0]
    changed = config()
    changed["studies"]["mylj"]["figures"]["loop_time"]["regex"] = r"^Loop time of ([0-9.]+)"
    assert load(changed).sweep.points[0].to_json() != first.to_json()
