"""Snakemake exits within seconds of learning that its last batch job ended, not one status
polling interval later (30 s on the PBS profiles): real Snakemake, its cluster-generic executor,
a submit command that runs the jobscript in the background and a status command that answers
from the job's process, with and without the Snakefile's SnakemakeRun.end_status_wait_at_shutdown."""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INTERVAL_S = 30
SNAKEFILE = """
import os
if os.environ.get("SCALESTUDY_TEST_WAKE") == "1":
    from scalestudy.planning.snakemake_adapter import SnakemakeRun
    SnakemakeRun.end_status_wait_at_shutdown()

rule a:
    output: "a.txt"
    shell: "touch {output}"
"""
SUBMIT = '#!/bin/bash\nnohup bash "${@: -1}" > job.log 2>&1 &\necho $!\n'
STATUS = """#!/bin/bash
if kill -0 "$1" 2>/dev/null; then answer=running; else answer=success; fi
echo "$(date +%s.%N) $answer" >> status.log
echo $answer
"""


def seconds_after_the_last_answer(folder: Path, wake: bool) -> float:
    """Seconds from the status command's 'success' to Snakemake's exit."""
    (folder / "Snakefile").write_text(SNAKEFILE)
    for name, text in (("submit.sh", SUBMIT), ("status.sh", STATUS)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), "SCALESTUDY_TEST_WAKE": "1" if wake else "0"}
    command = [sys.executable, "-m", "snakemake", "--executor", "cluster-generic", "--cluster-generic-submit-cmd",
               "./submit.sh", "--cluster-generic-status-cmd", "./status.sh", "--seconds-between-status-checks",
               str(INTERVAL_S), "--jobs", "1", "-q"]  # fmt: skip
    ran = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    ended = time.time()
    assert ran.returncode == 0, ran.stderr[-3000:]
    answers = (folder / "status.log").read_text().split("\n")
    last = max(float(line.split()[0]) for line in answers if line.endswith("success"))
    return ended - last


def test_snakemake_exits_within_seconds_of_its_last_job_not_a_polling_interval_later(tmp_path):
    (tmp_path / "woken").mkdir(), (tmp_path / "as-before").mkdir()
    # Side by side: each waits out its polling intervals asleep, in a folder of its own.
    with ThreadPoolExecutor(2) as pool:
        woken_done = pool.submit(seconds_after_the_last_answer, tmp_path / "woken", True)
        before_done = pool.submit(seconds_after_the_last_answer, tmp_path / "as-before", False)
        woken, before = woken_done.result(), before_done.result()
    assert before >= INTERVAL_S - 1  # Snakemake's own: the status thread's sleep is waited out
    assert woken < INTERVAL_S / 2, (woken, before)
