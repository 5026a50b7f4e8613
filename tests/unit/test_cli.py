"""Every command line names the argument it does not know, even where another is missing
(argparse alone checks the required ones first and says only 'required: command')."""

from __future__ import annotations

import pytest


def refusal(capsys, main, argv: list[str]) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code, capsys.readouterr().err.strip().splitlines()


def scalestudy(argv: list[str]):
    from scalestudy.__main__ import main

    return main(argv)


def pbs(argv: list[str]):
    from scalestudy.scheduler.pbs.__main__ import parsed_command

    return parsed_command(argv)


@pytest.mark.parametrize(
    ("main", "argv", "line"),
    [
        (
            scalestudy,
            ["--bogus"],
            "python -m scalestudy: unrecognized arguments: --bogus (allowed: -h/--help, a command (run-point, "
            "published, compare, memory, plan)); the following arguments are required: command; "
            "see python -m scalestudy --help",
        ),
        (
            scalestudy,
            ["compare", "--bogus=3", "base"],
            "python -m scalestudy compare: unrecognized arguments: --bogus=3 (allowed: -h/--help, --out, "
            "--fail-slower, --study); the following arguments are required: candidate, --out; "
            "see python -m scalestudy compare --help",
        ),
        (
            scalestudy,
            ["run-point", "--walltime-s", "-1", "--bogus", "-x"],
            "python -m scalestudy run-point: unrecognized arguments: --bogus -x (allowed: -h/--help, --point, "
            "--walltime-s, --cluster, --metrics, --log, --queue, --results-dir, --order-seed); the following "
            "arguments are required: --point, --cluster, --metrics; see python -m scalestudy run-point --help",
        ),
        (
            scalestudy,
            ["plan", "--bogus"],
            "python -m scalestudy plan: unrecognized arguments: --bogus (allowed: -h/--help, --profile, --configfile, "
            "--config, --predict-from); the following arguments are required: --profile; "
            "see python -m scalestudy plan --help",
        ),
        (
            pbs,
            ["--bogus"],
            "python -m scalestudy.scheduler.pbs: unrecognized arguments: --bogus (allowed: -h/--help, a command "
            "(submit, status, cancel, sidecar, plan)); the following arguments are required: command; "
            "see python -m scalestudy.scheduler.pbs --help",
        ),
        (
            pbs,
            ["submit", "job.sh", "--clust", "gadi", "--bogus"],
            "python -m scalestudy.scheduler.pbs: unrecognized arguments: --bogus; "
            "see python -m scalestudy.scheduler.pbs --help",
        ),
        (
            pbs,
            ["submit", "--bogus"],
            "python -m scalestudy.scheduler.pbs submit: unrecognized arguments: --bogus (allowed: -h/--help, "
            "--cluster); the following arguments are required: --cluster, jobscript; "
            "see python -m scalestudy.scheduler.pbs submit --help",
        ),
    ],
)
def test_an_unknown_argument_is_named_in_one_line_with_what_is_allowed(capsys, main, argv, line):
    status, lines = refusal(capsys, main, argv)
    assert status == 2 and lines == [line]


def test_a_missing_argument_alone_and_an_unknown_one_alone_keep_argparses_words(capsys):
    assert refusal(capsys, scalestudy, ["compare", "base"]) == (
        2,
        [
            "python -m scalestudy compare: the following arguments are required: candidate, --out; "
            "see python -m scalestudy compare --help"
        ],
    )
    assert refusal(capsys, scalestudy, ["compare", "a", "b", "--out", "o", "--bogus"]) == (
        2,
        ["python -m scalestudy: unrecognized arguments: --bogus; see python -m scalestudy --help"],
    )
    # A value that looks like a number, and an abbreviated option, are no unknown options.
    status, lines = refusal(capsys, scalestudy, ["run-point", "--walltime", "-5", "--clus", "local"])
    assert status == 2 and lines == [
        "python -m scalestudy run-point: the following arguments are required: --point, --metrics; "
        "see python -m scalestudy run-point --help"
    ]
