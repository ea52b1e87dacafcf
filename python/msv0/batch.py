"""Batch inference over many samples with one Session: the actor class of a Ray Data
map_batches pipeline, and the per-worker object of a Dask map_partitions one (README,
"Batch inference on Ray and Dask").

A BatchPredictor pickles as its model's bytes and options (msv0.Session does), so a cluster
ships it to each worker once and the worker plans and packs once.
"""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from msv0.errors import InputError
from msv0.model import Model
from msv0.session import Session


class BatchPredictor:
    """predictor(batch) runs the model on each sample of `batch`, {input name: [N, ...]} with
    the samples along the first axis, in slices of the model's own batch size, and returns the
    batch with one [N, ...] column per model output added. num_threads: the Session's threads,
    which should match the CPUs the worker (or Ray actor) was given."""

    def __init__(self, model: Model | str | os.PathLike | bytes, num_threads: int = 1):
        self.session = Session(model, num_threads=num_threads)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        inputs = self.session.inputs
        missing = [t.name for t in inputs if t.name not in batch]
        if missing:
            raise InputError(f"the batch has no column for input(s) {missing}; columns: {list(batch)}")
        columns = {t.name: np.asarray(batch[t.name]) for t in inputs}
        n = len(columns[inputs[0].name])
        if any(len(c) != n for c in columns.values()):
            raise InputError(f"input columns differ in length: { {k: len(c) for k, c in columns.items()} }")
        step = max(int(inputs[0].shape[0]) if inputs[0].shape else 1, 1)
        results: dict[str, list[np.ndarray]] = {t.name: [] for t in self.session.outputs}
        for start in range(0, n, step):
            out = self.session.run({k: c[start:start + step] for k, c in columns.items()})
            for k, v in out.items():
                results[k].append(v)
        return {**batch, **{k: np.concatenate(v) for k, v in results.items()}}
