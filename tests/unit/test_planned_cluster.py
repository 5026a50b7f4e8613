"""The PBS submit command refuses a job the workflow planned for another cluster (e.g.
`--config cluster=local` on the command line replacing the profile's cluster)."""

import json

import pytest
from scalestudy.config import clusters
from scalestudy.scheduler.jobscript import SubmitRefused
from scalestudy.scheduler.pbs.dialects import Gadi


def jobscript(tmp_path, resources):
    properties = {"rule": "run_pingpong", "params": {}, "resources": resources, "output": []}
    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/sh\n# properties = {json.dumps(properties)}\n")
    return path


def test_a_job_planned_for_another_cluster_is_refused_before_qsub(tmp_path):
    with pytest.raises(SubmitRefused) as refused:
        Gadi(clusters.load("gadi"), environ={"PROJECT": "ab12"}, qsub="/nonexistent/qsub").submit(
            jobscript(tmp_path, {"planned_cluster": "local"})
        )
    (problem,) = refused.value.problems
    assert "planned this job for 'local'" in problem and "cluster=gadi" in problem
