# HOOMD-blue WCA fluid: the initial state once per (N, density, dimensions), then one job
# per point. HOOMD-blue comes from `--sdm conda` (envs/hoomd.yaml) or a site module
# (`app_modules: {hoomd: [...]}` in the cluster file, with `--sdm env-modules`).
HOOMD_MODULES = list(CLUSTER.app_modules.get("hoomd", ()))
# Where jobs cannot import hoomd, no initial state is planned and every point ends
# `failed` at once with the reason (the runner checks again inside the job).
HOOMD_REACHABLE = jobs_can_import("hoomd", HOOMD_MODULES)


rule hoomd_initial_state:
    # Read-only once made: timed jobs only read it, and two points sharing N share one file.
    output:
        protected(f"{ASSETS_DIR}/hoomd-wca/hard_sphere_{{particles}}_{{rho}}_{{dimensions}}.gsd"),
    log:
        f"{ASSETS_DIR}/hoomd-wca/hard_sphere_{{particles}}_{{rho}}_{{dimensions}}.log",
    params:
        package=PACKAGE_DIR,
        python=job_python(),
    wildcard_constraints:
        particles=r"[1-9][0-9]*",
        rho=r"[0-9]+\.[0-9]+(e[-+]?[0-9]+)?",
        dimensions="[23]",
    conda:
        "../../envs/hoomd.yaml"
    envmodules:
        *HOOMD_MODULES,
    # One process on one node (a batch job of its own on clusters: PBS sizes it as a non-point job).
    resources:
        runtime=120,
        # Not beside a point being timed (the profile sets the limit).
        measurement_slot=1,
    shell:
        "PYTHONPATH={params.package:q}${{PYTHONPATH:+:$PYTHONPATH}} {params.python:q} -m scalestudy.apps.hoomd_wca"
        " initial-state --N {wildcards.particles} --rho {wildcards.rho} --dimensions {wildcards.dimensions}"
        " --output {output:q} > {log:q} 2>&1"


rule run_hoomd:
    input:
        run_inputs("hoomd") if HOOMD_REACHABLE else [],
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
        study=study_pattern("hoomd"),
    conda:
        "../../envs/hoomd.yaml"
    envmodules:
        *HOOMD_MODULES,
    resources:
        **RUN_RESOURCES,
    shell:
        "PYTHONPATH={params.package:q}${{PYTHONPATH:+:$PYTHONPATH}} {params.python:q} -m scalestudy run-point"
        " --point {params.point:q} --walltime-s {resources.walltime_s} --cluster {params.cluster:q}"
        " --queue {resources.queue:q}"
        " --metrics {output.metrics:q} --log {log:q}"
