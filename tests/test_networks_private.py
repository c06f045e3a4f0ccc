"""dperm.networks.make_private: DP-SGD in the caller's own PyTorch loop.

The clipped sums are checked against an independent computation (one autograd call per
example) on every layer path; the lots against the Poisson law; the noise against its
closed-form law and the public normaliser; the calibration against dp-accounting (an
independent accountant) on both sides; the budget, the refusals and the loop's misuses
against their specific errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

import dperm  # noqa: E402
from dperm.accounting.events import PoissonSampled, SelfComposed  # noqa: E402
from dperm.exceptions import BudgetExceededError, InvalidPrivacyParameter  # noqa: E402
from dperm.networks import convert_batchnorm, make_private  # noqa: E402
from dperm.networks._clipper import GradSampler  # noqa: E402

nn, F = torch.nn, torch.nn.functional
torch.set_num_threads(1)
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset


def _blobs(n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d)) + 1.5 * (2 * y[:, None] - 1)
    return torch.from_numpy(X.astype(np.float32)), torch.from_numpy(y)


class _Odd(nn.Module):
    """A layer dperm does not know: per-example gradients by torch.func."""

    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, d))
        self.inner = nn.Linear(d, d)

    def forward(self, x):
        return torch.tanh(self.inner(x * self.scale))


def _conv_net():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, 2, padding=1), nn.GroupNorm(2, 4), nn.Tanh(), nn.MaxPool2d(2, 1),
        nn.Conv2d(4, 6, 2, groups=2, dilation=1), nn.Flatten(), nn.Linear(24, 10),
        nn.LayerNorm(10), _Odd(10), nn.Linear(10, 3),
    )  # fmt: skip


class _Seq(nn.Module):
    """Embedding with a padding index, a conv1d, a layer called twice, tied weights."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8, padding_idx=0)
        self.conv = nn.Conv1d(8, 8, 3, padding=2, dilation=2)
        self.lin = nn.Linear(8, 8)
        self.out = nn.Linear(8, 20)
        self.out.weight = self.emb.weight

    def forward(self, x):
        h = self.emb(x)
        h = torch.tanh(self.conv(h.transpose(1, 2))).transpose(1, 2)
        h = self.lin(torch.tanh(self.lin(h)))
        return self.out(h).mean(1)


def _naive_clipped_sum(net, X, y, C, reduction):
    rows = []
    for i in range(X.shape[0]):
        loss = F.cross_entropy(net(X[i : i + 1]), y[i : i + 1], reduction=reduction)
        g = torch.autograd.grad(loss, list(net.parameters()))
        rows.append(torch.cat([t.reshape(-1) for t in g]))
    G = torch.stack(rows)
    norms = G.norm(dim=1)
    return (G * torch.clamp(C / norms, max=1.0)[:, None]).sum(0), norms


@pytest.mark.parametrize("method", ["auto", "ghost", "materialise"])
@pytest.mark.parametrize("case", ["conv", "sequence"])
def test_clipped_sums_match_a_naive_per_example_loop(case, method):
    torch.manual_seed(0)
    if case == "conv":
        net = _conv_net().double()
        X = torch.randn(7, 1, 8, 8, dtype=torch.float64)
        y = torch.randint(0, 3, (7,))
        reduction = "mean"
    else:
        net = _Seq().double()
        X = torch.randint(0, 20, (5, 6))
        X[0, :3] = 0  # padding rows get no gradient
        y = torch.randint(0, 20, (5,))
        reduction = "sum"
    _, norms = _naive_clipped_sum(net, X, y, 1.0, reduction)
    for C in (float(norms.min()) / 2, float(norms.median()), 2 * float(norms.max())):
        expected, _ = _naive_clipped_sum(net, X, y, C, reduction)
        sampler = GradSampler(net, loss_reduction=reduction, method=method)
        sampler.new_batch(X.shape[0])
        F.cross_entropy(net(X), y, reduction=reduction).backward()
        assert all(p.grad is None for p in net.parameters())  # no unclipped sum formed
        got = torch.cat([t.reshape(-1) for t in sampler.take(C)])
        sampler.remove()
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-9)


def test_a_non_finite_record_contributes_zero():
    net = nn.Sequential(nn.Linear(3, 2)).double()
    X = torch.tensor([[1.0, 2.0, 3.0], [float("nan"), 0.0, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 1])
    sampler = GradSampler(net, loss_reduction="sum")
    sampler.new_batch(2)
    F.cross_entropy(net(X), y, reduction="sum").backward()
    got = torch.cat([t.reshape(-1) for t in sampler.take(0.5)])
    sampler.remove()
    expected, _ = _naive_clipped_sum(net, X[:1], y[:1], 0.5, "sum")
    torch.testing.assert_close(got, expected)


def _private(n=600, b=60, epochs=3, seed=0, optim=None, **kw):
    X, y = _blobs(n)
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = (optim or (lambda p: torch.optim.Adam(p, lr=0.05)))(net.parameters())
    dl = DataLoader(TensorDataset(X, y), batch_size=b)
    kw = {"epsilon": 2.0, "delta": 1e-5, "epochs": epochs, "random_state": seed, **kw}
    return (X, y, *make_private(net, opt, dl, **kw))


def _train(net, opt, dl, epochs):
    for _ in range(epochs):
        for xb, yb in dl:
            opt.zero_grad()
            F.cross_entropy(net(xb), yb).backward()
            opt.step()


def _dp_accounting_epsilon(q, z, steps, delta):
    """ε of T replace-one Poisson-sampled Gaussian steps by dp-accounting, built
    independently (dperm's z is relative to Δ = 2C; dp-accounting's REPLACE_ONE
    Gaussian compares shifts ±1, so its multiplier is 2z)."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(NeighboringRelation.REPLACE_ONE)
    step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(2.0 * z))
    acc.compose(dp_event.SelfComposedDpEvent(step, steps))
    return acc.get_epsilon(delta)


def test_user_loop_with_adam_trains_spends_its_epsilon_and_charges_one_entry():
    with dperm.budget(3.0, 1e-4) as ledger:
        X, y, net, opt, dl = _private()
    assert len(ledger.entries) == 1 and ledger.events[0] == opt.dp_event
    assert opt.dp_event == SelfComposed(PoissonSampled(0.1, opt.dp_event.event.event), 30)
    assert opt.neighbouring == "replace-one" and opt.steps == 30 == 3 * len(dl)
    eps = _dp_accounting_epsilon(0.1, opt.noise_multiplier, opt.steps, 1e-5)
    assert 0.99 * 2.0 <= eps <= 2.0 * (1 + 1e-3), eps  # spends 99–100 % of ε
    _train(net, opt, dl, 3)
    assert opt.steps_taken == 30
    with torch.no_grad():
        assert (net(X).argmax(1) == y).float().mean() > 0.9
    text = dperm.privacy_statement(opt)
    assert "replace-one" in text and f"{opt.epsilon_spent:.4g}" in text
    with pytest.raises(InvalidPrivacyParameter, match="planned for 3 epoch"):
        iter(dl)  # the event covers no more lots


def test_a_budget_that_cannot_afford_the_run_refuses_it_before_any_lot():
    X, y = _blobs()
    net = nn.Sequential(nn.Linear(5, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    dl = DataLoader(TensorDataset(X, y), batch_size=60)
    with pytest.raises(BudgetExceededError), dperm.budget(1.0, 1e-4):
        make_private(net, opt, dl, epsilon=2.0, delta=1e-5, epochs=1)
    assert "forward" not in net[0].__dict__  # the taps are removed again


class _ImageFolder(torch.utils.data.Dataset):
    """Images on disk, one .npy file per record (read in __getitem__)."""

    def __init__(self, root, n):
        self.root, self.n = root, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        img = np.load(self.root / f"{i}.npy")
        return torch.from_numpy(img), int(img.mean() > 0)


def test_on_disk_dataset_with_empty_lots_and_a_conv_module(tmp_path):
    rng = np.random.default_rng(0)
    n = 40
    for i in range(n):
        sign = 1.0 if i % 2 else -1.0
        np.save(tmp_path / f"{i}.npy", (sign + 0.3 * rng.normal(size=(1, 6, 6))).astype("f4"))
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(1, 3, 3), nn.GroupNorm(1, 3), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten(),
        nn.Linear(27, 2),
    )  # fmt: skip
    opt = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.5)
    dl = DataLoader(_ImageFolder(tmp_path, n), batch_size=1)  # q = 1/40: many empty lots
    net, opt, dl = make_private(net, opt, dl, epsilon=8.0, delta=1e-3, epochs=2,
                                random_state=1)  # fmt: skip
    sizes = []
    for _ in range(2):
        for xb, yb in dl:
            sizes.append(len(xb))
            assert xb.shape[1:] == (1, 6, 6) and xb.dtype == torch.float32
            opt.zero_grad()
            F.cross_entropy(net(xb), yb).backward()  # NaN loss on an empty lot: no effect
            opt.step()
    assert len(sizes) == opt.steps == opt.steps_taken == 80 and sizes.count(0) > 10
    assert all(torch.isfinite(p).all() for p in net.parameters())


def test_poisson_lots_use_the_public_size_under_add_remove():
    X, y = _blobs(1000)
    net = nn.Sequential(nn.Linear(5, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    dl = DataLoader(TensorDataset(X, y, torch.arange(1000)), batch_size=100)
    # 1 000 rows present, public N = 2 000: q = 100/2000, expected lot 50 of the rows
    net, opt, dl = make_private(net, opt, dl, epsilon=4.0, delta=1e-5, epochs=20,
                                neighbouring="add-remove", dataset_size=2000,
                                random_state=3)  # fmt: skip
    assert dl.sample_rate == 0.05 and opt.expected_batch_size == 100.0
    assert opt.dp_event.neighbouring == "add-remove" and opt.steps == 400
    counts, seen = [], np.zeros(1000)
    for _ in range(20):
        for _xb, _yb, idx in dl:
            counts.append(len(idx))
            seen[idx.numpy()] += 1
            dl.state.stepped = dl.state.issued  # the lots alone are checked here
    counts = np.asarray(counts)
    # lot sizes are Binomial(1000, 0.05): mean 50, variance 47.5; no row twice in a lot
    assert len(counts) == 400 and seen.sum() == counts.sum()
    assert abs(counts.mean() - 50) < 4 * math.sqrt(47.5 / counts.size)
    assert abs(counts.var() / 47.5 - 1) < 0.3
    # every row is in Binomial(400, 0.05) lots: mean 20, variance 19
    assert abs(seen.mean() - 20) < 4 * math.sqrt(19 / 1000)
    assert abs(seen.var() / 19 - 1) < 0.3


def test_noise_has_the_calibrated_std_and_the_public_normaliser():
    """Zero inputs and no bias: every clipped sum is 0, so p.grad·m is pure noise of std
    z·2C (replace-one); m is the public expected lot size, whatever the lot's size."""
    X = torch.zeros(400, 50)
    y = torch.zeros(400, dtype=torch.long)
    net = nn.Sequential(nn.Linear(50, 2, bias=False))
    opt = torch.optim.SGD(net.parameters(), lr=0.0)
    dl = DataLoader(TensorDataset(X, y), batch_size=40)
    net, opt, dl = make_private(net, opt, dl, epsilon=1.0, delta=1e-5, epochs=2,
                                clipping_norm=0.5, random_state=5)  # fmt: skip
    draws, sizes = [], []
    for _ in range(2):
        for xb, yb in dl:
            opt.zero_grad()
            F.cross_entropy(net(xb), yb).backward()
            opt.step()
            draws.append(net[0].weight.grad.reshape(-1) * opt.expected_batch_size)
            sizes.append(len(xb))
    noise = torch.cat(draws).numpy()
    sigma = opt.noise_multiplier * 2 * 0.5
    assert opt.noise_std == pytest.approx(sigma) and len(set(sizes)) > 3
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-3
    assert noise.std() / sigma == pytest.approx(1.0, abs=4.0 / math.sqrt(noise.size))


def test_virtual_steps_give_the_same_run_as_whole_lots():
    runs = []
    for physical in (None, 7):
        _, _, net, opt, dl = _private(
            epochs=2, seed=4, max_physical_batch_size=physical,
            optim=lambda p: torch.optim.SGD(p, lr=0.3, momentum=0.5),
        )  # fmt: skip
        sizes = []
        for _ in range(2):
            for xb, yb in dl:
                sizes.append(len(xb))
                opt.zero_grad()
                F.cross_entropy(net(xb), yb).backward()
                opt.step()
        runs.append(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
        assert opt.steps_taken == opt.steps == 20
        if physical:
            assert max(sizes) <= 7 and len(sizes) > 20  # lots split, one noisy step each
    torch.testing.assert_close(runs[0], runs[1], rtol=1e-5, atol=1e-6)


def test_zero_grad_forgets_the_backward_passes_of_the_current_batch():
    """A backward pass followed by zero_grad leaves nothing in the step: the run equals
    the one without it (same lots, same noise; C large enough that nothing is clipped)."""
    runs = []
    for extra in (False, True):
        _, _, net, opt, dl = _private(epochs=1, seed=2, clipping_norm=100.0,
                                      optim=lambda p: torch.optim.SGD(p, lr=0.1))  # fmt: skip
        for xb, yb in dl:
            if extra:  # e.g. a diagnostic backward pass, then zero_grad
                F.cross_entropy(net(xb), yb).backward()
            opt.zero_grad()
            F.cross_entropy(net(xb), yb).backward()
            opt.step()
        runs.append(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
    torch.testing.assert_close(runs[0], runs[1])


def test_batch_norm_is_refused_and_converted():
    net = nn.Sequential(nn.Conv2d(1, 6, 3), nn.BatchNorm2d(6), nn.Flatten(), nn.Linear(6 * 16, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    dl = DataLoader(TensorDataset(torch.randn(50, 1, 6, 6), torch.randint(0, 2, (50,))), 10)
    with pytest.raises(InvalidPrivacyParameter, match="convert_batchnorm"):
        make_private(net, opt, dl, epsilon=1.0, delta=1e-3, epochs=1)
    net = convert_batchnorm(net)
    assert isinstance(net[1], nn.GroupNorm) and net[1].num_groups == 6
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net, opt, dl = make_private(net, opt, dl, epsilon=1.0, delta=1e-3, epochs=1)
    _train(net, opt, dl, 1)
    assert opt.steps_taken == opt.steps


def test_parameters_stay_on_their_device_and_no_step_leaves_torch(monkeypatch):
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        X, y = _blobs(200)
        net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2)).to(device, torch.float64)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        dl = DataLoader(TensorDataset(X.double(), y), batch_size=20)
        net, opt, dl = make_private(net, opt, dl, epsilon=2.0, delta=1e-4, epochs=1)
        monkeypatch.setattr(torch.Tensor, "numpy", _no_numpy)
        for xb, yb in dl:
            opt.zero_grad()
            F.cross_entropy(net(xb.to(device)), yb.to(device)).backward()
            opt.step()
            for p in net.parameters():
                assert p.grad.device == p.device and p.grad.dtype == torch.float64
        monkeypatch.undo()


def _no_numpy(self, *args, **kwargs):
    raise AssertionError("a training step left torch (Tensor.numpy)")


def test_learning_rate_schedulers_accept_the_dp_optimizer():
    _, _, net, opt, dl = _private(epochs=1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for xb, yb in dl:
        opt.zero_grad()
        F.cross_entropy(net(xb), yb).backward()
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05 * 0.5**10)
    assert opt.state_dict()["param_groups"][0]["lr"] == opt.param_groups[0]["lr"]


def test_misuse_of_the_loop_is_refused():
    _, _, net, opt, dl = _private(epochs=1)
    with pytest.raises(InvalidPrivacyParameter, match="without a new batch"):
        opt.step()
    it = iter(dl)
    xb, yb = next(it)
    F.cross_entropy(net(xb), yb).backward()
    with pytest.raises(InvalidPrivacyParameter, match="not called after the previous batch"):
        next(it)  # a lot whose noisy step was skipped
    # a parameter used outside its layer gets a plain gradient: nothing is released
    _, _, net, opt, dl = _private(epochs=1)
    xb, yb = next(iter(dl))
    F.cross_entropy(F.linear(torch.tanh(net[0](xb)), net[2].weight), yb).backward()
    with pytest.raises(InvalidPrivacyParameter, match="plain"):
        opt.step()


def test_bad_arguments_raise_specific_errors():
    X, y = _blobs(100)
    net = nn.Sequential(nn.Linear(5, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    dl = DataLoader(TensorDataset(X, y), batch_size=10)
    with pytest.raises(InvalidPrivacyParameter, match="dataset_size"):
        make_private(net, opt, dl, epsilon=1.0, delta=1e-5, epochs=1, neighbouring="add-remove")
    with pytest.raises(InvalidPrivacyParameter, match="epochs"):
        make_private(net, opt, dl, epsilon=1.0, delta=1e-5, epochs=0)
    with pytest.raises(InvalidPrivacyParameter, match="loss_reduction"):
        make_private(net, opt, dl, epsilon=1.0, delta=1e-5, epochs=1, loss_reduction="none")
    other = torch.optim.SGD(nn.Linear(5, 2).parameters(), lr=0.1)
    with pytest.raises(InvalidPrivacyParameter, match="not one of module"):
        make_private(net, other, dl, epsilon=1.0, delta=1e-5, epochs=1)
    with pytest.raises(InvalidPrivacyParameter, match="noise_multiplier"):
        make_private(net, opt, dl, epsilon=1.0, delta=1e-5, epochs=1, noise_multiplier=0.1)

    with pytest.raises(InvalidPrivacyParameter, match="max_physical_batch_size"):
        make_private(net, opt, dl, epsilon=1.0, delta=1e-5, epochs=1, max_physical_batch_size=0)
    assert "forward" not in net[0].__dict__  # refused: the module is untapped again
    F.cross_entropy(net(X), y).backward()
    assert net[0].weight.grad is not None  # and trains with plain gradients

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter([])

    with pytest.raises(InvalidPrivacyParameter, match="map-style"):
        make_private(net, opt, DataLoader(Stream(), batch_size=4), epsilon=1.0, delta=1e-5,
                     epochs=1, neighbouring="add-remove", dataset_size=100)  # fmt: skip
