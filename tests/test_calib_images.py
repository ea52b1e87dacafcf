"""Calibration from a directory of images (msv0.calib_images, `msv0 quantize --calib DIR`): the
samples' layout, size and normalisation against NumPy, the errors, and a quantization run."""
import numpy as np
import pytest

import msv0
from msv0 import cli, zoo
from msv0.calib_images import image_samples

Image = pytest.importorskip("PIL.Image")

COLOURS = [(255, 0, 10), (0, 128, 64), (30, 60, 90)]


@pytest.fixture
def images(tmp_path):
    """Three flat-coloured images of odd sizes, PNG and JPEG (JPEG keeps a flat colour within 1),
    and a file that is no image."""
    for k, (c, size, ext) in enumerate(zip(COLOURS, [(17, 9), (40, 33), (5, 64)], ["png", "PNG", "jpg"])):
        Image.new("RGB", size, c).save(tmp_path / f"{k}.{ext}")
    (tmp_path / "notes.txt").write_text("not an image")
    return tmp_path


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_samples_resized_and_normalised(images, layout):
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]
    shape = (1, 7, 11, 3) if layout == "nhwc" else (1, 3, 7, 11)
    x = image_samples(images, shape, layout, mean, std)
    assert x.shape == (3,) + shape and x.dtype == np.float32
    channels = x.reshape(3, 7 * 11, 3) if layout == "nhwc" else x.reshape(3, 3, 7 * 11).transpose(0, 2, 1)
    want = (np.array(COLOURS, np.float32) - mean) / std
    np.testing.assert_allclose(channels, np.broadcast_to(want[:, None, :], channels.shape), atol=1.01 / 2)


def test_grey_input_and_one_mean(images):
    x = image_samples(images, (1, 4, 4, 1), mean=[128.0])
    grey = np.array([0.299 * r + 0.587 * g + 0.114 * b for r, g, b in COLOURS]) - 128
    np.testing.assert_allclose(x.reshape(3, -1), np.broadcast_to(grey[:, None], (3, 16)), atol=1.5)


@pytest.mark.parametrize("args,match", [
    (dict(shape=(1, 4, 4, 2)), "no image: 2 channels"),
    (dict(shape=(2, 4, 4, 3)), "batch 1"),
    (dict(shape=(1, 4, 4, 3), mean=[1.0, 2.0]), "--mean has 2 values for 3 channels"),
    (dict(shape=(1, 4, 4, 3), std=[0.0]), "--std must be finite and non-zero"),
    (dict(shape=(1, 4, 4, 3), layout="chw"), "image layout 'chw'"),
])
def test_errors(images, args, match):
    with pytest.raises(msv0.InputError, match=match):
        image_samples(images, **args)


def test_unreadable_and_missing(images, tmp_path):
    (images / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(msv0.InputError, match="broken.png' cannot be read"):
        image_samples(images, (1, 4, 4, 3))
    (tmp_path / "empty").mkdir()
    with pytest.raises(msv0.InputError, match="holds no"):
        image_samples(tmp_path / "empty", (1, 4, 4, 3))
    with pytest.raises(msv0.InputError, match="does not exist"):
        image_samples(tmp_path / "nowhere", (1, 4, 4, 3))


def test_cli_quantize_from_images(images, tmp_path, capsys):
    net = zoo.Net("small", (1, 8, 8, 3))
    net.fc(net.gap(net.conv(net.input_name, 4, 3, act=1)), 3)
    (tmp_path / "f.ms").write_bytes(net.to_ms())
    assert cli.main(["quantize", str(tmp_path / "f.ms"), "--calib", str(images), "--mean", "127.5", "--std", "127.5",
                     "-o", str(tmp_path / "q.ms")]) == 0
    out = capsys.readouterr().out
    assert "int8 against fp32 on 3 calibration sample(s)" in out and "hurt most" in out
    x = image_samples(images, net.input_shape, mean=[127.5], std=[127.5])
    q = msv0.load(str(tmp_path / "q.ms"))
    assert msv0.Session(q).run([x[0]])["logits"].shape == (1, 3)
