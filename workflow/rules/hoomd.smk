# HOOMD-blue: the initial state of the WCA fluid, made once per (N, density, dimensions)
# where jobs can import hoomd (the app's run rule plans it as their input only then).


rule hoomd_initial_state:
    # Read-only once made: timed jobs only read it, and two points sharing N share one file.
    output:
        protected(LAYOUT.hoomd_state("{particles}", "{rho}", "{dimensions}")),
    log:
        LAYOUT.hoomd_state("{particles}", "{rho}", "{dimensions}", suffix="log"),
    wildcard_constraints:
        particles=r"[1-9][0-9]*",
        rho=r"[0-9]+\.[0-9]+(e[-+]?[0-9]+)?",
        dimensions="[23]",
    conda:
        APPS["hoomd"].conda_env
    envmodules:
        *CLUSTER.app_modules.get("hoomd", ()),
    # One process on one node (a batch job of its own on clusters: PBS sizes it as a non-point job).
    resources:
        runtime=120,
        # Not beside a point being timed (the profile sets the limit).
        measurement_slot=1,
    shell:
        job_shell("scalestudy.apps.hoomd_wca") + " initial-state --N {wildcards.particles} --rho {wildcards.rho} --dimensions {wildcards.dimensions}"
        " --output {output:q} > {log:q} 2>&1"
