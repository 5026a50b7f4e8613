# Plots per study and the one HTML page (and its Markdown twin) over all studies.


rule plots:
    input:
        scaling=f"{RESULTS}/{{study}}/scaling.csv",
        variants=f"{RESULTS}/{{study}}/variants.csv",
    output:
        **{
            kind: report(
                f"{RESULTS}/report/plots/{{study}}.{kind}.png",
                caption=f"../report/{kind}.rst",
                category="{study}",
                subcategory="plots",
            )
            for kind in PLOT_KINDS
        },
    params:
        budget_su=lambda wildcards: SWEEP.studies[wildcards.study].get("budget_su"),
    log:
        f"{RESULTS}/{{study}}/logs/plots.log",
    localrule: True
    run:
        from scalestudy.analysis import read_table
        from scalestudy.plots import plot_study

        plot_study(
            read_table(input.scaling), read_table(input.variants), wildcards.study, dict(output), params.budget_su
        )


rule report:
    input:
        runs=expand(f"{RESULTS}/{{study}}/runs.csv", study=STUDIES),
        scaling=expand(f"{RESULTS}/{{study}}/scaling.csv", study=STUDIES),
        variants=expand(f"{RESULTS}/{{study}}/variants.csv", study=STUDIES),
        plots=expand(f"{RESULTS}/report/plots/{{study}}.{{kind}}.png", study=STUDIES, kind=PLOT_KINDS),
    output:
        html=REPORT_HTML,
        markdown=REPORT_MARKDOWN,
    params:
        budgets={study: SWEEP.studies[study].get("budget_su") for study in STUDIES},
    log:
        f"{RESULTS}/report/report.log",
    localrule: True
    run:
        from scalestudy.report import build_from_files

        build_from_files(
            STUDIES,
            input.runs,
            input.scaling,
            input.variants,
            input.plots,
            output.html,
            output.markdown,
            params.budgets,
        )
