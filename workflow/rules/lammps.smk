# LAMMPS WCA fluid (the HOOMD-blue benchmark's twin): one job per point. LAMMPS makes
# its random initial state inside the job, untimed, in under a second: no cache rule.


rule run_lammps:
    input:
        run_inputs("lammps"),
    # launch.sh is written beside metrics.json; one declared output per job keeps big DAGs cheap.
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
        study=study_pattern("lammps"),
    conda:
        "../../envs/lammps.yaml"
    resources:
        **RUN_RESOURCES,
    shell:
        "PYTHONPATH={params.package:q}${{PYTHONPATH:+:$PYTHONPATH}} {params.python:q} -m scalestudy run-point"
        " --point {params.point:q} --walltime-s {resources.walltime_s} --cluster {params.cluster:q}"
        " --queue {resources.queue:q}"
        " --metrics {output.metrics:q} --log {log:q}"
