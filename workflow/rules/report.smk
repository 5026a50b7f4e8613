# Plots per study and the one HTML page (and its Markdown twin) over all studies.


rule plots:
    input:
        runs=LAYOUT.table("{study}", "runs"),
        scaling=LAYOUT.table("{study}", "scaling"),
        variants=LAYOUT.table("{study}", "variants"),
    output:
        **{
            kind: report(
                LAYOUT.plot("{study}", kind),
                caption=f"../report/{kind}.rst",
                category="{study}",
                subcategory="plots",
            )
            for kind in PLOT_KINDS
        },
    params:
        budget_su=lambda wildcards: SETTINGS_OF[wildcards.study].budget_su,
    log:
        LAYOUT.study_log("{study}", "plots"),
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.presentation.plots import plot_from_files

        plot_from_files(
            input.scaling, input.variants, wildcards.study, dict(output), params.budget_su, log[0], input.runs
        )


rule report:
    input:
        runs=[LAYOUT.table(study, "runs") for study in STUDIES],
        scaling=[LAYOUT.table(study, "scaling") for study in STUDIES],
        variants=[LAYOUT.table(study, "variants") for study in STUDIES],
        plots=[LAYOUT.plot(study, kind) for study in STUDIES for kind in PLOT_KINDS],
        ladders=[LAYOUT.ladder_file(study) for study in STUDIES if SETTINGS_OF[study].ladder],
    output:
        html=LAYOUT.report_html,
        markdown=LAYOUT.report_markdown,
        provenance=[LAYOUT.provenance(study) for study in STUDIES],
    params:
        budgets=tables.budgets(PLAN),
    log:
        LAYOUT.report_log,
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.presentation.report import build_from_files

        build_from_files(
            STUDIES,
            input.runs,
            input.scaling,
            input.variants,
            input.plots,
            output.html,
            output.markdown,
            params.budgets,
            log[0],
            output.provenance,
            input.ladders,
        )


# `snakemake ... compare --config compare_baseline=PATH`: this results directory's studies
# against a baseline (another results directory, or a published record); runs no point.
rule compare:
    input:
        compare_inputs,
    output:
        **compare_outputs(LAYOUT.compare_dir),
    params:
        baseline=lambda wildcards: compare_baseline(),
    log:
        LAYOUT.compare_log,
    localrule: True
    resources:
        **LOCAL_STEP,
    run:
        from scalestudy.presentation.compare import compare_from_files

        compare_from_files(params.baseline, LAYOUT.results, STUDIES, LAYOUT.compare_dir, log[0])
