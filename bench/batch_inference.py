"""Images/s of batch inference: one process vs a local Ray cluster (Ray Data map_batches, one
BatchPredictor actor per worker) vs a Dask LocalCluster (map_partitions), README recipes.

    pip install 'msv0[ray,dask]'
    python bench/batch_inference.py [--model mobilenet_v2] [--images 256] [--workers 2]

Every engine runs `--workers` one-thread Sessions, except the single process, which runs one
Session with --workers threads. Cluster start-up and placing the images on the cluster are
not timed; actor start-up and shipping the predictor (each worker plans and packs once) are.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import msv0
from msv0 import zoo
from msv0.batch import BatchPredictor


def single(model: bytes, x: np.ndarray, workers: int) -> float:
    start = time.perf_counter()
    BatchPredictor(model, num_threads=workers)({"input": x})
    return time.perf_counter() - start


def on_ray(model: bytes, x: np.ndarray, workers: int) -> float:
    import ray

    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ds = ray.data.from_numpy(x).rename_columns({"data": "input"}).repartition(4 * workers).materialize()
        start = time.perf_counter()
        ds.map_batches(BatchPredictor, fn_constructor_kwargs={"model": model, "num_threads": 1},
                       compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1, batch_size=16,
                       batch_format="numpy").materialize()
        return time.perf_counter() - start
    finally:
        ray.shutdown()


def on_dask(model: bytes, x: np.ndarray, workers: int) -> float:
    import dask.bag as db
    import distributed

    def predict(items, predictor):
        return list(predictor({"input": np.stack(items)})["logits"])

    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        images = db.from_sequence(list(x), npartitions=4 * workers).persist()
        distributed.wait(images)
        start = time.perf_counter()
        predictor = client.scatter(BatchPredictor(model, num_threads=1), broadcast=True)
        images.map_partitions(predict, predictor).compute()
        return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mobilenet_v2", choices=sorted(zoo.NETS))
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    net = zoo.NETS[args.model]()
    model = net.to_ms()
    x = np.random.default_rng(0).standard_normal((args.images,) + tuple(net.input_shape[1:])).astype(np.float32)
    print(f"{args.model}, {args.images} images, {args.workers} workers, ISA {msv0.isa()}")
    base = None
    for name, fn in (("single process", single), ("ray", on_ray), ("dask", on_dask)):
        try:
            seconds = fn(model, x, args.workers)
        except ImportError as e:
            print(f"{name:15s} skipped ({e.name} not installed)")
            continue
        rate = args.images / seconds
        base = base or rate
        print(f"{name:15s} {rate:8.1f} images/s  ({rate / base:.2f}x of the single process)")


if __name__ == "__main__":
    main()
