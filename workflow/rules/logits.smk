# Stage 3: dump a trained run's val/test logits from its checkpoint. Deleting logits.npz
# re-runs only this rule; the model is not retrained. An imported run (model
# `{name: logits_file, path: ...}`) is not trained: import_logits checks the file and copies
# its logits into the run directory, and everything downstream treats it as any run.
# The exported files are kept() outputs (common.smk): Snakemake does not delete them before the
# job runs and puts them back, with their checksum sidecars, if it fails, so a re-planned export
# (-f, -R, changed code) that cannot re-dump them (a damaged checkpoint) leaves the run with the
# logits it had.


localrules:
    import_logits,


rule export_logits:
    input:
        data=ancient(DATA_READY),
        run_config=paths.run_file(RUN, paths.RUN_CONFIG),
        history=paths.run_file(RUN, paths.HISTORY),
    output:
        **kept(
            logits=paths.run_file(RUN, paths.LOGITS),
            info=paths.run_file(RUN, paths.RUN_INFO),
        ),
    log:
        paths.log("export_logits", RUN),
    benchmark:
        paths.benchmark("export_logits", RUN)
    wildcard_constraints:
        model=TRAINED_MODELS,
        dataset=LOGITS_DATASETS,
    group:
        RUN_GROUP
    conda:
        "../envs/torch.yaml"
    threads: run_resource("threads")
    resources:
        mem_mb=run_resource("mem_mb"),
        runtime=30,
        gpu=run_resource("gpu"),
        gpu_slots=run_resource("gpu_slots"),
        gres=run_resource("gres"),
    params:
        run_dir=lambda wildcards: PLAN.run(wildcards).run_dir,
        data_root=lambda wildcards, input: paths.data_root_from_marker(input.data),
    script:
        "../scripts/export_logits.py"


# A translation run (mukhoti2020 §5.2): its val/test target tokens under teacher forcing,
# token_logits.npz (focalcal.translation.token_profile), in place of logits.npz; as
# export_logits, published from what the training job staged or dumped from the checkpoint.
rule export_token_logits:
    input:
        data=ancient(DATA_READY),
        run_config=paths.run_file(RUN, paths.RUN_CONFIG),
        history=paths.run_file(RUN, paths.HISTORY),
    output:
        **kept(
            token_logits=paths.token_logits(RUN),
            info=paths.run_file(RUN, paths.RUN_INFO),
        ),
    log:
        paths.log("export_token_logits", RUN),
    benchmark:
        paths.benchmark("export_token_logits", RUN)
    wildcard_constraints:
        model=TRAINED_MODELS,
        dataset=TRANSLATION_DATASETS,
    group:
        RUN_GROUP
    conda:
        "../envs/torch.yaml"
    threads: run_resource("threads")
    resources:
        mem_mb=run_resource("mem_mb"),
        runtime=60,
        gpu=run_resource("gpu"),
        gpu_slots=run_resource("gpu_slots"),
        gres=run_resource("gres"),
    params:
        run_dir=lambda wildcards: PLAN.run(wildcards).run_dir,
        data_root=lambda wildcards, input: paths.data_root_from_marker(input.data),
    script:
        "../scripts/export_token_logits.py"


rule import_logits:
    input:
        lambda wildcards: PLAN.logits_source(PLAN.run(wildcards)),
    output:
        **kept(
            logits=paths.run_file(RUN, paths.LOGITS),
            info=paths.run_file(RUN, paths.RUN_INFO),
            run_config=paths.run_file(RUN, paths.RUN_CONFIG),
        ),
    log:
        paths.log("import_logits", RUN),
    benchmark:
        paths.benchmark("import_logits", RUN)
    wildcard_constraints:
        model=IMPORTED_MODELS,
    conda:
        "../envs/analysis.yaml"
    params:
        run_identity=lambda wildcards: PLAN.run_identity(PLAN.run(wildcards)),
    script:
        "../scripts/import_logits.py"
