"""The submit command (PbsPro.submit): a Snakemake jobscript -> one `qsub` line in the
site's dialect, or a refusal (one line per problem) before anything reaches the server.

What is read of the jobscript, and how a job is refused, is every backend's
(scheduler.jobscript).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from ...config.packing import Pack
from ...config.requests import job_request, request_problems
from ...model.paths import BATCH_LOG, CLUSTERS_DIR_ENV, cluster_file, clusters_dir
from ...model.point import Point
from ..jobscript import SubmitRefused, generic_request, job_properties, jobscript_point
from . import cache
from .sidecar import SIDECAR_VARS


def site_environment(cluster) -> str:
    """Lines that give the job the site's modules and environment (PBS passes none), and the
    folder the cluster file was read from: inside the job `run-point --cluster` must read the
    same file (a site's own under $SCALESTUDY_CLUSTERS_DIR, not the checkout's namesake)."""
    directory = clusters_dir().resolve()
    lines = [f"# site environment, from {directory / cluster.name}.yaml"]
    # Values from config reach the job's shell quoted: one word each, nothing expanded.
    lines.append(f"export {CLUSTERS_DIR_ENV}={shlex.quote(str(directory))}")
    if cluster.module_paths:
        lines.append(shlex.join(["module", "use", *cluster.module_paths]))
    if cluster.modules:
        lines.append(shlex.join(["module", "load", *cluster.modules]))
    lines += [f"export {name}={shlex.quote(value)}" for name, value in cluster.job_env.items()]
    return "\n".join(lines) + "\n"


# The line of profiles/pbs/jobscript.sh that site_environment replaces.
SITE_MARKER = "# scalestudy: site environment\n"


def submit(jobscript: Path, scheduler: Any) -> str:
    """Submit a Snakemake jobscript with `scheduler` (a pbspro.PbsPro, in its cluster's
    dialect: its cluster, qsub command and environment); returns the PBS job id. Raises
    SubmitRefused with one line per problem when the site would reject the job."""
    cluster, qsub, environ = scheduler.cluster, scheduler.qsub, scheduler.environ
    # The dialect's own refusals (dialects.site_rules: the same for a study's load).
    site_rules = (scheduler.problems,)
    properties = job_properties(jobscript)
    params, resources = properties.get("params") or {}, properties.get("resources") or {}
    cluster_name = cluster.name
    planned_for = resources.get("planned_cluster") or cluster_name
    if planned_for != cluster_name:
        # `--config k=v` on the command line replaces the profile's `config: [cluster=...]`.
        raise SubmitRefused(
            [
                f"cluster: the workflow planned this job for {planned_for!r} but the profile submits to "
                f"{cluster_name!r}; with --config on the command line, add cluster={cluster_name}"
            ]
        )
    problems = []
    project = cluster.project_name(environ)
    if not project:
        problems.append(f"{cluster_file(cluster.name)}: project is not set and $PROJECT is empty")
    outputs = properties.get("output") or []
    # The points of this group job: those of its pack that Snakemake put in it (all of them
    # with the profiles' group-components; one each without).
    pack = [
        entry
        for entry in cache.load_packs(cache.cache_dir(environ)).get(properties.get("groupid") or "") or []
        if entry["metrics"] in outputs
    ]
    if properties.get("type") == "group" and pack:
        # A pack: its points one after another in one batch job (config/packing.py).
        points = [Point.from_json(entry["point"], int(entry["walltime_s"]), entry.get("queue")) for entry in pack]
        first = Pack(str(properties["groupid"]), tuple(points)).request_point()
        problems += request_problems(first, cluster, site_rules)
        request = dataclasses.replace(job_request(first, cluster), name=str(properties["groupid"])[:48])
        params = {"point": None}
        outputs = [entry["metrics"] for entry in pack]
    elif (point := jobscript_point(properties)) is not None:
        problems += request_problems(point, cluster, site_rules)
        request = job_request(point, cluster)
    else:
        request = generic_request(properties, cluster)
    if problems:
        raise SubmitRefused(problems)
    directory = cache.cache_dir(environ)
    run_dir = Path(outputs[0]).parent if outputs else directory / cache.LOGS
    run_dir.mkdir(parents=True, exist_ok=True)
    script = jobscript.read_text()
    if SITE_MARKER in script:
        script = script.replace(SITE_MARKER, site_environment(cluster), 1)
    if pack:
        script = one_after_another(script, points)
    jobscript.write_text(script)
    argv = scheduler.qsub_command(
        request, project=project, log_path=str((run_dir / BATCH_LOG).resolve()), jobscript=str(jobscript)
    )
    argv[0] = qsub
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    metrics = next((o for o in outputs if o.endswith("metrics.json")), None)
    if result.returncode != 0:
        refusal = f"qsub exited with {result.returncode}: {result.stderr.strip() or result.stdout.strip()}"
        # The server refused a point or a pack (a queue limit the cluster file lacks, a project
        # out of allocation): a failed record for each of its points, so that the tables and
        # the report still build.
        if pack:
            return refused_points(pack, refusal, shlex.join(argv))
        if metrics is None or "point" not in params:
            raise SubmitRefused([refusal])
        entry = {"metrics": metrics, "point": params["point"], "walltime_s": resources.get("walltime_s")}
        return refused_points([entry], refusal, shlex.join(argv))
    job_id = result.stdout.strip().splitlines()[0].strip()
    if pack:
        # Every point of the pack: the status command records each one the job left without a record.
        cache.register(directory, job_id, run=environ.get(SIDECAR_VARS) or None, pack=pack, cluster=cluster.name)
        return job_id
    cache.register(
        directory,
        job_id,
        run=environ.get(SIDECAR_VARS) or None,
        cluster=cluster.name,
        metrics=metrics,
        point=params.get("point"),
        walltime_s=resources.get("walltime_s"),
        queue=resources.get("queue"),
    )
    return job_id


def refused_points(entries: list[dict[str, Any]], refusal: str, command: str) -> str:
    """Write the failed record of each point of a job qsub refused (one point, or a pack's);
    the pseudo job id the status command answers `success` for at once (the records are the
    result)."""
    import sys
    import uuid

    from ...launch.runner import record_lost_job
    from .status import REFUSED_PREFIX

    reason = f"{refusal} (the batch job was never submitted: {command})"
    for entry in entries:
        record_lost_job(
            Path(entry["metrics"]), entry["point"], entry.get("walltime_s"), reason, queue=entry.get("queue")
        )
    where = entries[0]["metrics"] if len(entries) == 1 else f"the {len(entries)} points of the pack"
    print(f"scalestudy: {refusal}; recorded as a failed point in {where}", file=sys.stderr)
    return f"{REFUSED_PREFIX}{uuid.uuid4().hex[:12]}"


def one_after_another(script: str, points: list[Point]) -> str:
    """A group job's script that runs its points one after another, in the pack's order.

    Snakemake writes one command for a group job, `... --target-jobs A B C ... --cores all`,
    and its Snakemake inside the job would run the points side by side, in an order of its
    own. Here that command becomes one per point (`--target-jobs A`, then B, ...): one
    measurement at a time, repeats and variants interleaved as the pack lists them, and a
    point that fails does not stop the next."""
    lines = script.splitlines(keepends=True)
    for index, line in enumerate(lines):
        found = re.search(r"--target-jobs ((?:[^-\s]\S* )+)", line)
        if not found:
            continue
        targets = found.group(1).split()  # as written (quoted or not): `cd ... && python ...` stays as is
        # cluster-generic ends the command with `&& exit 0 || exit 1`: after every point but
        # the last, that would end the job. Each command notes a failure; the job exits 1 if any.
        head, tail = line[: found.start(1)], re.sub(r"\s*&&\s*exit 0 \|\| exit 1\s*$", "", line[found.end(1) :])
        commands = []
        for point in points:
            mine = [t for t in targets if shlex.split(t)[0].endswith(f":study={point.study},point={point.id}")]
            commands.append(f"{head}{' '.join(mine)} {tail.rstrip()} || scalestudy_failed=1\n")
        lines[index] = "".join(commands) + "exit ${scalestudy_failed:-0}\n"
        break
    return "".join(lines)
