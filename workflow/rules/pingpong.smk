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
    wildcard_constraints:
        study=study_pattern("pingpong"),
    conda:
        "../../envs/pingpong.yaml"
    resources:
        **RUN_RESOURCES,
    shell:
        "PYTHONPATH={params.package:q}${{PYTHONPATH:+:$PYTHONPATH}} {params.python:q} -m scalestudy run-point"
        " --point {params.point:q} --walltime-s {resources.walltime_s} --cluster {params.cluster:q}"
        " --queue {resources.queue:q}"
        " --metrics {output.metrics:q} --log {log:q}"
