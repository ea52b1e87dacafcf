"""Calibration samples from a directory of PNG and JPEG images, read with Pillow (the `images`
extra): each image, in file-name order, converted to the input's channel count (1: grey, 3: RGB,
4: RGBA), resized bilinearly to its height and width, and normalised per channel as
(pixel - mean) / std with pixels in [0, 255]."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from msv0.errors import InputError

EXTENSIONS = (".png", ".jpg", ".jpeg")
LAYOUTS = ("nhwc", "nchw")
MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def _per_channel(name: str, values: Sequence[float], channels: int) -> np.ndarray:
    v = np.asarray(values, np.float32).reshape(-1)
    if v.size not in (1, channels):
        raise InputError(f"--{name} has {v.size} values for {channels} channels (give 1 or {channels})")
    return np.broadcast_to(v, (channels,))


def image_samples(directory: str | os.PathLike, shape: Sequence[int], layout: str = "nhwc",
                  mean: Sequence[float] = (0.0,), std: Sequence[float] = (1.0,)) -> np.ndarray:
    """The images of `directory` as float32 [K, *shape] for an input of 4-D `shape` with batch
    1, laid out as `layout` says (nhwc or nchw)."""
    if layout not in LAYOUTS:
        raise InputError(f"image layout '{layout}': expected one of {', '.join(LAYOUTS)}")
    if len(shape) != 4 or shape[0] != 1:
        raise InputError(f"image calibration fills a 4-D input of batch 1, not shape {list(shape)}")
    h, w, c = (shape[1], shape[2], shape[3]) if layout == "nhwc" else (shape[2], shape[3], shape[1])
    if c not in MODES or h < 1 or w < 1:
        raise InputError(f"an input of shape {list(shape)} ({layout}) is no image: {c} channels of {h}x{w}")
    mean, std = _per_channel("mean", mean, c), _per_channel("std", std, c)
    if not np.all(np.isfinite(std)) or np.any(std == 0):
        raise InputError("--std must be finite and non-zero")
    try:
        from PIL import Image
    except ImportError:
        raise InputError("reading images needs Pillow: pip install 'msv0[images]'") from None
    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"calibration directory {str(root)!r} does not exist")
    files = sorted(p for p in root.iterdir() if p.suffix.lower() in EXTENSIONS and p.is_file())
    if not files:
        raise InputError(f"calibration directory {str(root)!r} holds no {'/'.join(EXTENSIONS)} images")
    out = np.empty((len(files), h, w, c), np.float32)
    for k, f in enumerate(files):
        try:
            with Image.open(f) as im:
                im = im.convert(MODES[c]).resize((w, h), Image.Resampling.BILINEAR)
                pixels = np.asarray(im, np.float32)
        except (OSError, ValueError) as e:
            raise InputError(f"calibration image {str(f)!r} cannot be read: {e}") from None
        out[k] = (pixels.reshape(h, w, c) - mean) / std
    if layout == "nchw":
        out = out.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(out)[:, None]
