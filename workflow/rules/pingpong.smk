# MPI ping-pong between rank 0 and the last rank: one job per point. The cheap real
# MPI job of the fault tests and the scheduler tests.


rule run_pingpong:
    input:
        run_inputs("pingpong"),
    output:
        metrics=f"{RUN_DIR}/metrics.json",
    log:
        f"{RUN_DIR}/stdout.log",
    params:
        point=point_json,
        cluster=CLUSTER.name,
        package=PACKAGE_DIR,
        python=job_python(),
        # Changes only for a failed point under --config retry_failed=true: that point reruns.
        retry=retry_token,
    wildcard_constraints:
        study=study_pattern("pingpong"),
    conda:
        "../../envs/pingpong.yaml"
    resources:
        nodes=lambda wildcards: point_of(wildcards).nodes,
        ranks_per_node=lambda wildcards: point_of(wildcards).ranks_per_node,
        gpus_per_node=lambda wildcards: point_of(wildcards).gpus_per_node,
        runtime=walltime_minutes,
        walltime_s=lambda wildcards: point_of(wildcards).walltime_seconds,
        # One point at a time per machine when measuring locally (profile sets the limit).
        measurement_slot=1,
    shell:
        "PYTHONPATH={params.package:q}${{PYTHONPATH:+:$PYTHONPATH}} {params.python:q} -m scalestudy run-point"
        " --point {params.point:q} --walltime-s {resources.walltime_s} --cluster {params.cluster:q}"
        " --metrics {output.metrics:q} --log {log:q}"
