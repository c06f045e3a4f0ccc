"""The algorithm functions and ``dperm.networks.fit`` inside an active budget (issue #28,
item 2): a direct call reserves before it reads the data, commits the event it reports,
cancels on an exception — and a call made by an estimator charges nothing more.

Every budget here is a real SQLite store in ``tmp_path``; the data that must not be read is
an object whose every access is recorded and raises.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dperm
from dperm.accounting import EpsilonDelta, Ledger
from dperm.accounting.events import ADD_REMOVE, REPLACE_ONE
from dperm.algorithms import dp_sgd, objective_perturbation, output_perturbation
from dperm.algorithms.base import planned_event
from dperm.exceptions import BudgetExceededError
from dperm.losses import Logistic


class Untouchable:
    """Private data that must not be read: its shape is public (a replace-one n), any other
    access is recorded and raises."""

    def __init__(self, shape):
        self.shape = shape
        self.reads = []

    def _read(self, what):
        self.reads.append(what)
        raise RuntimeError(f"the data was read ({what})")

    def __getattr__(self, name):
        self._read(name)

    def __array__(self, *args, **kwargs):
        self._read("__array__")

    def __len__(self):
        self._read("__len__")

    def __getitem__(self, key):
        self._read("__getitem__")

    def __iter__(self):
        self._read("__iter__")


def _xy(n=400, d=3):
    X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(n, d))
    return X, np.where(X[:, 0] > 0, 1, -1)


def _store(tmp_path, epsilon=1.0, delta=1e-4, **kw):
    path = tmp_path / "budget.db"
    Ledger.open(path, epsilon=epsilon, delta=delta, **kw)
    return path


def _kinds(path):
    return [r.kind for r in Ledger.open(path).records if r.kind != "create"]


def _output(X, y, epsilon, **kw):
    return output_perturbation.fit(
        Logistic(), X, y, epsilon=epsilon, delta=0.0, data_norm=1.0, alpha=0.1,
        random_state=0, **kw,
    )  # fmt: skip


# ------------------------------------------------------ reserve before the data is read
def test_an_overspend_is_refused_before_the_data_is_read(tmp_path):
    path = _store(tmp_path)
    X, y = Untouchable((400, 3)), Untouchable((400,))
    with dperm.budget(path), pytest.raises(BudgetExceededError, match="output_perturbation"):
        _output(X, y, epsilon=1.5)
    assert X.reads == [] and y.reads == []  # nothing of the data was touched
    assert _kinds(path) == []  # and nothing recorded


def test_the_reservation_precedes_the_first_read_and_stays_charged_when_it_fails(tmp_path):
    """An affordable call reserves, then reads the data — here the read raises.  A failure
    after the data was read may depend on it (issue #37: a refund would tell it for
    free): the reservation is committed with the planned event."""
    path = _store(tmp_path)
    X, y = Untouchable((400, 3)), Untouchable((400,))
    with dperm.budget(path) as ledger, pytest.raises(RuntimeError, match="the data was read"):
        _output(X, y, epsilon=0.5)
    assert X.reads or y.reads
    assert _kinds(path) == ["reserve", "commit"]
    (entry,) = ledger.entries
    assert entry.reserved == EpsilonDelta(0.5, 0.0) and entry.actual is None


def test_a_direct_call_commits_the_event_it_reports(tmp_path):
    path = _store(tmp_path)
    X, y = _xy()
    with dperm.budget(path):
        result = _output(X, y, epsilon=0.25)
        assert [e.status for e in Ledger.open(path).entries] == ["committed"]
    (entry,) = Ledger.open(path).entries  # re-read from the file
    assert entry.label == "algorithms.output_perturbation.fit"
    assert entry.reserved == EpsilonDelta(0.25, 0.0) and entry.actual == result.event
    assert _kinds(path) == ["reserve", "commit"]
    # delta=None is 1/n² for these functions: reserved as such (n from the shape only)
    with dperm.budget(path):
        result = objective_perturbation.fit(
            Logistic(), X, y, epsilon=0.25, delta=None, data_norm=1.0, alpha=0.1,
            random_state=0,
        )  # fmt: skip
    entry = Ledger.open(path).entries[-1]
    assert entry.reserved == EpsilonDelta(0.25, 1.0 / 400**2)
    assert entry.actual == result.event and result.diagnostics["delta"] == 1.0 / 400**2


def test_the_budget_refuses_the_call_that_would_overspend_it(tmp_path):
    path = _store(tmp_path)
    X, y = _xy()
    with dperm.budget(path):
        _output(X, y, epsilon=0.4)
        _output(X, y, epsilon=0.4)
        with pytest.raises(BudgetExceededError, match="active budget"):
            _output(X, y, epsilon=0.4)
    assert len(Ledger.open(path).entries) == 2


def test_outside_a_budget_nothing_is_charged(tmp_path):
    path = _store(tmp_path)
    X, y = _xy()
    _output(X, y, epsilon=5.0)  # no active budget: runs as before
    assert _kinds(path) == []


# ----------------------------------------------- a given noise multiplier: the plan's event
def _sgd(X, y, z, **kw):
    return dp_sgd.fit(
        Logistic(), X, y, noise_multiplier=z, data_norm=1.0, dataset_size=400, epochs=1,
        random_state=0, **kw,
    )  # fmt: skip


def test_a_noise_multiplier_call_reserves_its_planned_event_before_the_first_step(tmp_path):
    path = _store(tmp_path, neighbouring=ADD_REMOVE)
    X, y = _xy()
    seen = []

    def callback(t, T, theta):  # runs after each noisy step: the reservation is there
        if not seen:
            seen.append([e.status for e in Ledger.open(path).entries])

    with dperm.budget(path):
        result = _sgd(X, y, 4.0, callback=callback)
    assert seen == [["reserved"]]
    (entry,) = Ledger.open(path).entries
    assert entry.status == "committed" and entry.label == "algorithms.dp_sgd.fit"
    assert entry.reserved == result.event  # the exact event of the public plan
    assert result.event.event.event.neighbouring == ADD_REMOVE

    steps = []
    with dperm.budget(path), pytest.raises(BudgetExceededError, match="dp_sgd"):
        _sgd(X, y, 0.5, callback=lambda *a: steps.append(a))  # far too little noise
    assert steps == []  # refused before its first step
    assert len(Ledger.open(path).entries) == 1

    def boom(t, T, theta):  # the iterate reached user code: released ⇒ charged (#37)
        raise KeyboardInterrupt

    with dperm.budget(path), pytest.raises(KeyboardInterrupt):
        _sgd(X, y, 4.0, callback=boom)
    assert _kinds(path)[-2:] == ["reserve", "commit"]
    assert len(Ledger.open(path).entries) == 2


# ------------------------------------------------------------------ no double charge
def test_an_estimator_or_a_wrapper_charges_once(tmp_path):
    """An estimator holds its fit's reservation: the algorithm it calls charges nothing;
    ``fit_single_sample`` runs ``fit`` inside its own charge."""
    path = _store(tmp_path, epsilon=3.0)
    X, y = _xy()
    with dperm.budget(path):
        for mechanism in ("output", "dp-sgd"):
            dperm.DPLogisticRegression(
                epsilon=0.3, delta=1e-6, classes=[-1, 1], mechanism=mechanism, random_state=0
            ).fit(X, y)
        result = dp_sgd.fit_single_sample(
            Logistic(), X, y, epsilon=0.5, delta=1e-6, data_norm=1.0, steps=50, random_state=0
        )
    entries = Ledger.open(path).entries
    assert [e.label for e in entries] == ["DPLogisticRegression"] * 2 + [
        "algorithms.dp_sgd.fit_single_sample"
    ]
    assert entries[-1].reserved == EpsilonDelta(0.5, 1e-6) and entries[-1].actual == result.event
    assert _kinds(path).count("reserve") == 3


# ------------------------------------------------------------------------- networks
def test_networks_fit_inside_a_budget(tmp_path):
    torch = pytest.importorskip("torch")
    from dperm import networks

    path = _store(tmp_path)
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.4, 0.4, size=(300, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)

    def net():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

    with dperm.budget(path):
        result = networks.fit(net(), X, y, epsilon=0.5, delta=1e-5, epochs=1, random_state=0)
        # the estimator holds the reservation; the networks.fit it calls charges nothing
        dperm.DPMLPClassifier(
            (4,), epsilon=0.3, delta=1e-5, n_components=None, epochs=1, classes=[0, 1],
            random_state=0,
        ).fit(X, y)  # fmt: skip
        private = Untouchable((300, 4))
        with pytest.raises(BudgetExceededError, match=r"networks\.dp_sgd\.fit"):
            networks.fit(net(), private, y, epsilon=0.9, delta=1e-5)
        assert private.reads == []  # refused before the data was read
    entry, mlp = Ledger.open(path).entries
    assert entry.label == "networks.dp_sgd.fit" and entry.status == "committed"
    assert entry.reserved == EpsilonDelta(0.5, 1e-5) and entry.actual == result.event
    assert mlp.label == "DPMLPClassifier" and mlp.status == "committed"
    assert _kinds(path) == ["reserve", "commit"] * 2


# ------------------------------------------------------------- the planned reservation
def test_planned_event_reads_only_public_arguments():
    sig = inspect.signature(dp_sgd.fit)
    X = Untouchable((400, 3))
    plan = planned_event(sig, (Logistic(), X, None), {"epsilon": 1.0, "delta": 1e-6})
    assert plan == EpsilonDelta(1.0, 1e-6, neighbouring=ADD_REMOVE)  # Poisson default
    kw = {"epsilon": 1.0, "delta": 1e-6, "sampling": "shuffle"}
    assert planned_event(sig, (Logistic(), X, None), kw).neighbouring == REPLACE_ONE
    assert planned_event(sig, (Logistic(), X, None), {"noise_multiplier": 1.0}) is None
    assert planned_event(sig, (Logistic(), X, None), {"epsilon": -1.0, "delta": 1e-6}) is None
    op = inspect.signature(objective_perturbation.fit)
    kw = {"epsilon": 2.0, "delta": None, "data_norm": 1.0, "alpha": 0.1}
    plan = planned_event(op, (Logistic(), X, None), kw)
    assert plan == EpsilonDelta(2.0, 1.0 / 400**2, neighbouring=REPLACE_ONE)
    assert X.reads == []


def test_every_public_private_fit_is_accounted_once():
    """Each public ``fit``/``fit_*`` of dperm.algorithms (and dperm.networks.fit) is wrapped
    by ``@private_fit`` exactly once — a new algorithm without it fails here."""
    import importlib
    import pkgutil

    import dperm.algorithms as pkg

    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"dperm.algorithms.{info.name}")
        for name, fn in vars(module).items():
            if (name == "fit" or name.startswith("fit_")) and inspect.isfunction(fn):
                if fn.__module__ == module.__name__:
                    found.append(fn)
    from dperm import networks  # importable without torch (imported when a network trains)

    found.append(networks.fit)
    assert len(found) >= 18
    for fn in found:
        inner = getattr(fn, "__wrapped__", None)
        assert inner is not None, f"{fn.__module__}.{fn.__name__} does not charge a budget"
        assert not hasattr(inner, "__wrapped__"), f"{fn.__module__}.{fn.__name__}: twice"


def test_a_direct_call_in_a_worker_of_an_active_budget_is_refused(monkeypatch):
    """No ledger here but the mark of a parent process's active budget: the call cannot be
    counted, so it is refused — before it reads the data."""
    from dperm.accounting.active import ENV_MARK

    monkeypatch.setenv(ENV_MARK, "1")  # pid 1: never this process
    X, y = Untouchable((400, 3)), Untouchable((400,))
    with pytest.raises(BudgetExceededError, match="worker process"):
        _output(X, y, epsilon=0.5)
    assert X.reads == [] and y.reads == []
