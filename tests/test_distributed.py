"""Beyond one process: Model and Session pickle (the model's bytes travel, the Session is
rebuilt with its options), msv0.batch.BatchPredictor, and the README's recipes on a local Ray
cluster (Ray Data map_batches, one Session per actor) and a Dask LocalCluster (map_partitions,
the predictor scattered to each worker once). Ray and Dask tests skip when not installed:
pip install 'msv0[ray]' / 'msv0[dask]'."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import msv0
from msv0 import zoo
from msv0.batch import BatchPredictor

MODEL = zoo.mobilenet_tiny()


def images(n: int, seed: int = 0) -> np.ndarray:
    shape = msv0.load(MODEL).inputs[0].shape
    return np.random.default_rng(seed).standard_normal((n,) + shape[1:]).astype(np.float32)


def serial(x: np.ndarray) -> np.ndarray:
    s = msv0.Session(MODEL)
    return np.concatenate([s.run({"input": x[i:i + 1]})["logits"] for i in range(len(x))])


def test_model_pickles_as_its_bytes():
    m = msv0.load(MODEL)
    data = pickle.dumps(m)
    assert len(data) < len(MODEL) + 200
    back = pickle.loads(data)
    assert back.nodes == m.nodes and [t.name for t in back.tensors] == [t.name for t in m.tensors]
    for a, b in zip(m.tensors, back.tensors):
        assert (a.raw is None) == (b.raw is None) and (a.raw is None or np.array_equal(a.raw, b.raw))


def test_session_pickles_with_its_options():
    s = msv0.Session(MODEL, num_threads=2, memory_limit=1 << 28)
    x = images(1)
    s.run({"input": x})
    back = pickle.loads(pickle.dumps(s))
    assert (back.num_threads, back.memory_limit) == (2, 1 << 28)
    np.testing.assert_array_equal(back.run({"input": x})["logits"], s.run({"input": x})["logits"])


def test_batch_predictor_runs_each_sample():
    x = images(5)
    p = pickle.loads(pickle.dumps(BatchPredictor(MODEL, num_threads=2)))
    out = p({"input": x, "id": np.arange(5)})
    assert list(out) == ["input", "id", "logits"]
    np.testing.assert_array_equal(out["id"], np.arange(5))
    np.testing.assert_allclose(out["logits"], serial(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(msv0.InputError, match="no column for input"):
        p({"image": x})


def test_ray_data_map_batches():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    x = images(24)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ds = ray.data.from_items([{"input": a, "id": i} for i, a in enumerate(x)])
        # Two actors, each one CPU and a one-thread Session: num_threads matches num_cpus.
        out = ds.map_batches(BatchPredictor, fn_constructor_kwargs={"model": MODEL, "num_threads": 1},
                             compute=ray.data.ActorPoolStrategy(size=2), num_cpus=1, batch_size=8,
                             batch_format="numpy").take_all()
    finally:
        ray.shutdown()
    got = np.stack([r["logits"] for r in sorted(out, key=lambda r: r["id"])])
    np.testing.assert_allclose(got, serial(x), rtol=1e-5, atol=1e-5)


def predict_partition(items: list, predictor: BatchPredictor) -> list:
    return list(predictor({"input": np.stack(items)})["logits"])


def test_dask_map_partitions():
    db = pytest.importorskip("dask.bag")
    distributed = pytest.importorskip("distributed")
    x = images(24)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        predictor = client.scatter(BatchPredictor(MODEL, num_threads=1), broadcast=True)  # unpickled once per worker
        got = db.from_sequence(list(x), npartitions=4).map_partitions(predict_partition, predictor).compute()
    np.testing.assert_allclose(np.stack(got), serial(x), rtol=1e-5, atol=1e-5)
