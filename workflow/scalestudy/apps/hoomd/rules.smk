# HOOMD-blue: the initial state of the WCA fluid, made once per (N, density, dimensions)
# where jobs can import hoomd (the app's run rule plans it as their input only then). The
# Snakefile includes this file from the app's folder (scalestudy.apps.registry.rules_files). The
# file, its wildcards and how it is made are the app's (app.py beside this file, "the made
# input"); this rule only wires them.
HOOMD = APPS["hoomd"]


rule hoomd_initial_state:
    # Read-only once made: timed jobs only read it, and two points sharing N share one file.
    output:
        protected(HOOMD.state_pattern(LAYOUT)),
    log:
        HOOMD.state_pattern(LAYOUT, suffix="log"),
    wildcard_constraints:
        **HOOMD.state_wildcards,
    conda:
        HOOMD.conda_env
    envmodules:
        *CLUSTER.app_modules.get(HOOMD.name, ()),
    # One process on one node (a batch job of its own on clusters: PBS sizes it as a non-point job).
    resources:
        runtime=HOOMD.make_state_runtime_min,
        # Not beside a point being timed (the profile sets the limit).
        measurement_slot=1,
    shell:
        job_shell(HOOMD.program) + " " + HOOMD.make_state_arguments + " > {log:q} 2>&1"
