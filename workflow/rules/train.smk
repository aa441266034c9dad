# Stage 2: train one run. The checkpoint in the run directory is not a declared output, so
# that a killed, failed or re-triggered job resumes from it instead of starting over
# (Snakemake deletes a plain output before re-running its job, and puts a kept() one back as it
# was before a failed job, without the epochs that job trained); on a finished run the job
# re-writes its outputs from the checkpoint. Device and compile are not params: the job reads
# them from the config, so changing them re-plans nothing. A run that another process is
# training (a second checkout sharing results/, or a second Snakemake after --unlock) stops
# this workflow while its DAG is built, before anything of the live run is touched.


rule train:
    input:
        data=ancient(DATA_READY),
        trained_elsewhere=not_trained_elsewhere,
    output:
        **kept(
            run_config=paths.run_file(RUN, paths.RUN_CONFIG),
            history=paths.run_file(RUN, paths.HISTORY),
        ),
    log:
        paths.log("train", RUN),
    benchmark:
        paths.benchmark("train", RUN)
    wildcard_constraints:
        model=TRAINED_MODELS,
    retries: config["training"]["retries"]
    group:
        RUN_GROUP
    conda:
        "../envs/torch.yaml"
    threads: run_resource("threads")
    resources:
        mem_mb=run_resource("mem_mb"),
        runtime=run_resource("runtime"),
        gpu=run_resource("gpu"),
        gpu_slots=run_resource("gpu_slots"),
        gres=run_resource("gres"),
    params:
        run_identity=lambda wildcards: PLAN.run_identity(PLAN.run(wildcards)),
        run_dir=lambda wildcards: PLAN.run(wildcards).run_dir,
        data_root=lambda wildcards, input: paths.data_root_from_marker(input.data),
    script:
        "../scripts/train.py"
