"""Issue #32, the edges of dperm.networks a new user hits.

* the ghost-norm path took modules that call a Linear layer twice or tie two layers'
  weights, and under-estimated their per-example norms (an under-clipped sum): the
  calls that touch a shared parameter are now summed per example before the norm, on
  every path; the clipped sum is checked against an independent per-example
  computation;
* torch's own errors (a module that does not take X's rows, labels beyond its k
  outputs, a loss that does not fit the outputs) are dperm errors naming the parameter;
* ``device="cuda"`` without CUDA is a specific error; ``predict`` before ``fit`` is
  scikit-learn's NotFittedError; tampered or damaged MLP files are ModelFileErrors.
"""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dperm  # noqa: E402
from _helpers import tamper_model_file  # noqa: E402
from dperm.estimators.mlp import DPMLPClassifier  # noqa: E402
from dperm.exceptions import InvalidDataError, InvalidPrivacyParameter, ModelFileError  # noqa: E402
from dperm.networks import fit as net_fit  # noqa: E402
from dperm.networks._torch import resolve_device  # noqa: E402
from dperm.networks.per_example import clipped_gradient_sum, shares_parameters  # noqa: E402

torch.set_num_threads(1)
nn = torch.nn


def _shared_modules():
    torch.manual_seed(0)
    reused = nn.Linear(4, 4)
    reuse = nn.Sequential(reused, nn.Tanh(), reused, nn.Tanh(), nn.Linear(4, 3))
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    b.weight = a.weight  # tied weights
    tied = nn.Sequential(a, nn.Tanh(), b, nn.Tanh(), nn.Linear(4, 3))
    return {"reuse": reuse.double(), "tied": tied.double()}


def _exact_clipped_sum(module, X, y, C):
    """Independent: one autograd call per example over the distinct parameters (a
    shared tensor's gradient is the sum of its uses), clipped and summed in float64."""
    params = list(module.parameters())  # each distinct tensor once
    total = None
    for i in range(X.shape[0]):
        loss = nn.functional.cross_entropy(module(X[i : i + 1]), y[i : i + 1])
        g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(loss, params)])
        g = g * min(1.0, C / float(g.norm()))
        total = g if total is None else total + g
    return total


@pytest.mark.parametrize("name", ["reuse", "tied"])
def test_shared_parameters_are_summed_per_example_before_the_norm(name):
    module = _shared_modules()[name]
    X = torch.randn(12, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 3, (12,), generator=torch.Generator().manual_seed(2))
    assert shares_parameters(module)
    C = 0.05  # small enough that every example is clipped: the norms decide the sum
    exact = _exact_clipped_sum(module, X, y, C)
    for method in ("auto", "ghost", "materialise", "vmap"):
        got = clipped_gradient_sum(module, "cross_entropy", X, y, C, method)
        torch.testing.assert_close(got, exact, rtol=1e-9, atol=1e-12)


def test_distinct_layers_are_exact_on_the_ghost_path():
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 3)).double()
    assert not shares_parameters(module)
    X = torch.randn(16, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (16,))
    torch.testing.assert_close(
        clipped_gradient_sum(module, "cross_entropy", X, y, 0.05, "ghost"),
        _exact_clipped_sum(module, X, y, 0.05),
        rtol=1e-9,
        atol=1e-12,
    )


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize(
    ("module", "target", "loss", "needle"),
    [
        (lambda: nn.Sequential(nn.Linear(4, 2)), None, "cross_entropy", "cannot take rows of X"),
        (lambda: nn.Sequential(nn.Linear(5, 2)), "plus2", "cross_entropy", "outside 0..1"),
        (lambda: nn.Sequential(nn.Linear(5, 3)), "wide", "mse", "loss='mse'"),
    ],
)
def test_torch_errors_are_dperm_errors(data, module, target, loss, needle):
    X, y = data
    yy = {None: y, "plus2": y + 2, "wide": np.zeros((200, 2), np.float32)}[target]
    with pytest.raises(InvalidDataError, match=needle) as info:
        net_fit(module(), X, yy, loss=loss, epsilon=1.0, delta=1e-5, random_state=0, epochs=1)
    assert "Traceback" not in str(info.value)


def test_cuda_without_cuda_is_a_specific_error(data):
    if torch.cuda.is_available():  # pragma: no cover - CPU machines run this test
        pytest.skip("this machine has CUDA")
    with pytest.raises(InvalidPrivacyParameter, match="no CUDA device"):
        resolve_device("cuda")
    X, y = data
    with pytest.raises(InvalidPrivacyParameter, match="device='cuda'"):
        net_fit(nn.Sequential(nn.Linear(5, 2)), X, y, epsilon=1.0, delta=1e-5, device="cuda")


def test_predict_before_fit_is_not_fitted_error(data):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        DPMLPClassifier().predict(data[0])


@pytest.fixture(scope="module")
def mlp_file(data, tmp_path_factory):
    X, y = data
    clf = DPMLPClassifier(classes=[0, 1], random_state=0, epochs=2).fit(X, y)
    return dperm.save(clf, tmp_path_factory.mktemp("mlp") / "m.dperm"), clf


def test_tampered_mlp_files_are_refused(mlp_file, tmp_path):
    path, clf = mlp_file
    assert dperm.load(tamper_model_file(path, tmp_path / "same.dperm")).predict(
        np.zeros((1, 5))
    ).shape == (1,)
    swap = "tanh" if clf.activation != "tanh" else "relu"
    bad = tamper_model_file(
        path, tmp_path / "act.dperm", meta=lambda m: m["params"].update(activation=swap)
    )
    with pytest.raises(ModelFileError, match="modified after it was written"):
        dperm.load(bad)
    nan = {"coefs_.0.npy": np.full_like(clf.coefs_[0], np.nan)}
    with pytest.raises(ModelFileError, match="non-finite"):
        dperm.load(tamper_model_file(path, tmp_path / "nan.dperm", arrays=nan))


def test_a_flipped_byte_is_a_model_file_error(mlp_file, tmp_path):
    path, _ = mlp_file
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("coefs_.0.npy")
        start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    raw[start + info.compress_size // 2] ^= 0xFF
    flipped = tmp_path / "flipped.dperm"
    flipped.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="corrupt"):
        dperm.load(flipped)
