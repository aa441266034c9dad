# Stage 3-4 for segmentation runs (hossain2021): score a trained run on its test fold from its
# checkpoint (IoU, Hausdorff distance, pixel accuracy, pixel ECE) and keep a few test images
# with their masks for the qualitative figure, and the run's record (run.json: device, time,
# versions) for the run inventory. Segmentation runs are evaluated, not calibrated;
# deleting a run's evaluation re-makes it without retraining.


rule evaluate_segmentation:
    input:
        data=ancient(f"{DATA_ROOT}/ready/{{dataset}}.json"),
        run_config=f"results/runs/{RUN}/run_config.json",
        history=f"results/runs/{RUN}/history.csv",
    output:
        metrics=f"results/segmentation/{RUN}/metrics.csv",
        samples=f"results/segmentation/{RUN}/samples.npz",
        info=f"results/segmentation/{RUN}/run.json",
    log:
        f"results/logs/evaluate_segmentation/{RUN}.log",
    benchmark:
        f"results/benchmarks/evaluate_segmentation/{RUN}.tsv"
    group:
        RUN_GROUP
    conda:
        "../../envs/torch.yaml"
    threads: run_resource("threads")
    resources:
        mem_mb=run_resource("mem_mb"),
        runtime=30,
        gpu=run_resource("gpu"),
    params:
        run_dir=lambda wildcards: PLAN.run(wildcards).run_dir,
        data_root=lambda wildcards, input: data_root_from_marker(input.data),
        n_bins=max(config["ece_bins"]),
    script:
        "../scripts/evaluate_segmentation.py"
