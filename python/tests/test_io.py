"""cortado.io as pycaffe's caffe.io: Transformer, load_image and
resize_image, oversample, and the BlobProto / Datum conversions."""
import numpy as np
import pytest


def test_blobproto_roundtrip(caffe):
    io = caffe.io
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = -a
    blob = io.array_to_blobproto(a, d)
    assert list(blob.shape.dim) == [2, 3, 4]
    assert np.array_equal(io.blobproto_to_array(blob), a)
    assert np.array_equal(io.blobproto_to_array(blob, return_diff=True), d)
    legacy = type(blob)()
    legacy.num, legacy.channels, legacy.height, legacy.width = 1, 2, 1, 3
    legacy.data.extend(range(6))
    assert io.blobproto_to_array(legacy).shape == (1, 2, 1, 3)
    s = io.arraylist_to_blobprotovector_str([a, a[0]])
    back = io.blobprotovector_str_to_arraylist(s)
    assert len(back) == 2 and np.array_equal(back[1], a[0])


def test_datum_roundtrip(caffe):
    io = caffe.io
    img = (np.arange(2 * 3 * 4) % 256).astype(np.uint8).reshape(2, 3, 4)
    datum = io.array_to_datum(img, label=7)
    assert datum.label == 7 and len(datum.data) == 24 and not datum.float_data
    assert np.array_equal(io.datum_to_array(datum), img)
    f = io.array_to_datum(img.astype(np.float32) / 2)
    assert len(f.float_data) == 24 and np.allclose(io.datum_to_array(f), img / 2)
    with pytest.raises(ValueError):
        io.array_to_datum(np.zeros((2, 2)))


def test_save_and_load_image(caffe, tmp_path):
    io = caffe.io
    rgb = np.zeros((6, 5, 3), dtype=np.float32)
    rgb[..., 0] = 1.0  # red
    rgb[2:4, 1:3, 2] = 0.5
    path = str(tmp_path / 'x.png')
    io.save_image(path, rgb)
    back = io.load_image(path)
    assert back.dtype == np.float32 and back.shape == (6, 5, 3)
    assert np.allclose(back, np.round(rgb * 255) / 255, atol=1e-6)  # RGB order, [0, 1]
    gray = io.load_image(path, color=False)
    assert gray.shape == (6, 5, 1) and 0.29 < gray[0, 0, 0] < 0.31  # luma of red
    io.save_image(str(tmp_path / 'g.png'), np.linspace(0, 1, 12).reshape(3, 4))
    assert io.load_image(str(tmp_path / 'g.png'), color=False).shape == (3, 4, 1)
    with pytest.raises(caffe.CortadoError, match='nope.png'):
        io.load_image(str(tmp_path / 'nope.png'))


def test_resize_image(caffe):
    io = caffe.io
    im = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    up = io.resize_image(im, (8, 8))
    assert up.shape == (8, 8, 1) and up.dtype == np.float32
    assert up.min() >= 0 and up.max() <= 15 and up[0, 0, 0] == 0 and up[-1, -1, 0] == 15
    assert np.allclose(io.resize_image(im, (4, 4)), im)
    nearest = io.resize_image(im, (2, 2), interp_order=0)
    assert set(nearest.ravel()) <= set(im.ravel())
    const = io.resize_image(np.full((3, 3, 3), 0.25, np.float32), (5, 7))
    assert const.shape == (5, 7, 3) and (const == 0.25).all()


def test_transformer(caffe):
    io = caffe.io
    t = io.Transformer({'data': (1, 3, 4, 4)})
    t.set_transpose('data', (2, 0, 1))
    t.set_channel_swap('data', (2, 1, 0))
    t.set_raw_scale('data', 255)
    t.set_mean('data', np.array([10.0, 20.0, 30.0]))
    t.set_input_scale('data', 0.5)
    img = np.random.RandomState(0).rand(4, 4, 3).astype(np.float32)
    out = t.preprocess('data', img)
    want = (img.transpose(2, 0, 1)[::-1] * 255 - np.array([10, 20, 30])[:, None, None]) * 0.5
    assert out.shape == (3, 4, 4) and np.allclose(out, want, atol=1e-4)
    assert np.allclose(t.deprocess('data', out), img, atol=1e-5)
    small = t.preprocess('data', np.zeros((2, 2, 3), np.float32))  # resized to the input
    assert small.shape == (3, 4, 4)
    with pytest.raises(Exception, match='not one of the net inputs'):
        t.preprocess('other', img)
    with pytest.raises(Exception):
        t.set_channel_swap('data', (1, 0))
    with pytest.raises(ValueError):
        t.set_mean('data', np.zeros(4))
    with pytest.raises(ValueError):
        t.set_mean('data', np.zeros((3, 5, 5)))
    t.set_mean('data', np.zeros((3, 4, 4)))  # an elementwise mean of the input's shape


def test_oversample(caffe):
    io = caffe.io
    im = np.arange(6 * 8 * 1, dtype=np.float32).reshape(6, 8, 1)
    crops = io.oversample([im, im + 100], (4, 4))
    assert crops.shape == (20, 4, 4, 1)
    assert np.array_equal(crops[0], im[:4, :4])           # top left
    assert np.array_equal(crops[3], im[2:, 4:])           # bottom right
    assert np.array_equal(crops[4], im[1:5, 2:6])         # centre
    assert np.array_equal(crops[5], im[:4, :4][:, ::-1])  # mirrored
    assert np.array_equal(crops[10], im[:4, :4] + 100)
