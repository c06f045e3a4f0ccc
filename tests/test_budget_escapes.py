"""The budget against the user's own code (issue #37): *released ⇒ charged*.

Every test runs user code around dperm's fits while a budget is active — a callback that
raises, a fit nested in a callback, a loss or a scorer, a worker process, a thread, an
asyncio task, a warning turned into an error — and collects every output that reached
user code (an iterate handed to a callback, a returned model, a fitted attribute left on
an estimator, a nested fit's result).  The property checked is the same everywhere:

    each released output has its event in the ledger (committed, or reserved: charged),
    or the fit that would have produced it was refused before releasing anything.

The budgets are real ledgers — in memory, or a SQLite store shared with real worker
processes (fork, spawn, joblib's loky and multiprocessing backends) — never mocks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import multiprocessing as mp
import os
import threading
import warnings
from collections import Counter

import joblib
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

import dperm
from dperm.accounting import Ledger
from dperm.algorithms import dp_gd, dp_sgd, output_perturbation
from dperm.exceptions import BudgetExceededError, InvalidDataError, PrivacyLeakWarning
from dperm.losses import Logistic
from dperm.model_selection import PrivateRandomSearch
from dperm.stores import MemoryStore, SqliteStore

pytestmark = pytest.mark.filterwarnings("ignore::dperm.exceptions.ClippingWarning")

N, D = 200, 3


def _xy(n=N, d=D, seed=0):
    X = np.random.default_rng(seed).uniform(-0.5, 0.5, size=(n, d)) / np.sqrt(d)
    return X, np.where(X[:, 0] > 0, 1, -1)


X, Y = _xy()


# ----------------------------------------------------------------------------- the property
def charged(ledger) -> Counter:
    """Labels of the ledger's live entries (committed or reserved), re-read from its store."""
    if not isinstance(ledger, Ledger):
        ledger = Ledger.open(ledger)
    return Counter(e.label for e in ledger.entries)


def assert_released_charged(ledger, released) -> None:
    """Every label in ``released`` (one per released output) is charged at least as often."""
    missing = Counter(released) - charged(ledger)
    assert not missing, f"released but not charged: {dict(missing)}; ledger: {charged(ledger)}"


def _store(tmp_path, epsilon=1.5, delta=1e-5):
    path = str(tmp_path / "budget.db")
    Ledger.open(path, epsilon=epsilon, delta=delta)
    return path


class StopTraining(Exception):
    """Early stopping, the user's way."""


def _sgd(epsilon=1.0, **kw):
    kw = {"data_norm": 1.0, "sampling": "shuffle", "steps": 6, "batch_size": 20, **kw}
    return dp_sgd.fit(Logistic(), X, Y, epsilon=epsilon, delta=1e-6, random_state=0, **kw)


def _gd(epsilon=1.0, **kw):
    return dp_gd.fit(Logistic(), X, Y, epsilon=epsilon, delta=1e-6, data_norm=1.0, steps=6,
                     random_state=0, **kw)  # fmt: skip


def _output(epsilon, X=X, y=Y):
    return output_perturbation.fit(
        Logistic(), X, y, epsilon=epsilon, delta=0.0, data_norm=1.0, alpha=0.1, random_state=0
    )


SGD, GD = "algorithms.dp_sgd.fit", "algorithms.dp_gd.fit"
OUTPUT = "algorithms.output_perturbation.fit"


# ================================================================ B1: a callback that raises
def _raising(exc, seen, at=3):
    def callback(t, T, theta):
        seen.append(theta.copy())  # the iterate reached user code
        if t == at:
            raise exc

    return callback


def _generator_callback(seen, at=3):
    """A callback fed into a generator that stops after ``at`` iterates (StopIteration)."""

    def consumer():
        for _ in range(at - 1):
            seen.append((yield))
        seen.append((yield))

    gen = consumer()
    next(gen)
    return lambda t, T, theta: gen.send(theta.copy())


@pytest.mark.parametrize("how", ["early-stop", "keyboard-interrupt", "generator"])
def test_b1_a_callback_that_raises_keeps_the_fit_charged(how):
    """4 DP-SGD + 4 DP-GD fits at ε = 1 in a budget of 1.5, each stopped by its callback
    after three iterates: every fit that showed an iterate is charged (measured at f2918d4:
    0 entries, spent 0)."""
    ledger = Ledger(1.5, 1e-5)
    released = []
    for fit, label in [(_sgd, SGD), (_gd, GD)] * 4:
        seen = []
        if how == "generator":
            callback, expected = _generator_callback(seen), StopIteration
        else:
            exc = StopTraining() if how == "early-stop" else KeyboardInterrupt()
            callback, expected = _raising(exc, seen), type(exc)
        with ledger.active():
            try:
                fit(callback=callback)
            except BudgetExceededError:
                assert not seen  # refused before its first step
            except expected:
                assert len(seen) == 3
        if seen:
            released.append(label)
    assert released  # the first fit runs
    assert_released_charged(ledger, released)
    assert ledger.spent()[0] > 0


def test_b1_the_networks_callback_too():
    torch = pytest.importorskip("torch")
    from dperm import networks

    Xf = X.astype(np.float32)
    yc = (Y > 0).astype(int)
    ledger = Ledger(1.5, 1e-5)
    released = []
    for _ in range(3):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        seen = []
        with ledger.active():
            try:
                networks.fit(net, Xf, yc, epsilon=1.0, delta=1e-6, steps=5, batch_size=20,
                             callback=_raising(StopTraining(), seen, at=2),
                             random_state=0)  # fmt: skip
            except BudgetExceededError:
                assert not seen
            except StopTraining:
                pass
        if seen:  # the iterate, and the module holding it
            released.append("networks.dp_sgd.fit")
    assert released
    assert_released_charged(ledger, released)


def test_b1_a_keyboard_interrupt_before_anything_is_shown_cancels():
    """Ctrl-C (or a parameter error) before any iterate reached user code releases nothing:
    the reservation is cancelled and the budget is as before."""
    ledger = Ledger(1.5, 1e-5)
    with ledger.active(), pytest.raises(dperm.exceptions.InvalidPrivacyParameter):
        _sgd(learning_rate=-1.0, callback=lambda *a: None)
    assert [r.kind for r in ledger.records][-2:] == ["reserve", "cancel"]
    assert not ledger.entries


# ================================================================ B2: user code inside a fit
def test_b2_a_fit_called_from_a_callback_is_charged():
    """``output_perturbation.fit(ε = 5)`` inside a DP-SGD callback in a budget of 2: refused,
    exactly as at top level (measured at f2918d4: released)."""
    ledger = Ledger(2.0, 1e-5)
    inner = []

    def callback(t, T, theta):
        if t == 2:
            inner.append(_output(5.0))

    with ledger.active():
        with pytest.raises(BudgetExceededError, match="output_perturbation"):
            _sgd(callback=callback)
        with pytest.raises(BudgetExceededError):
            _output(5.0)  # the same call at top level
    assert inner == []
    # the outer fit had shown iterates before its callback raised: charged
    assert_released_charged(ledger, [SGD])

    ledger = Ledger(3.0, 1e-5)

    def affordable(t, T, theta):
        if t == 2:
            inner.append(_output(0.5))

    with ledger.active():
        _sgd(callback=affordable)
    assert len(inner) == 1
    assert_released_charged(ledger, [SGD, OUTPUT])


def test_b2_an_estimator_fitted_in_a_callback_is_charged():
    ledger = Ledger(3.0, 1e-5)
    models = []

    def callback(t, T, theta):
        if t == 2:
            clf = dperm.DPLogisticRegression(epsilon=0.5, delta=1e-6, classes=[-1, 1])
            models.append(clf.fit(X, Y))

    with ledger.active():
        _sgd(callback=callback)
    assert len(models) == 1
    assert_released_charged(ledger, [SGD, "DPLogisticRegression"])


def test_b2_a_fit_inside_a_per_example_gradient_is_charged():
    ledger = Ledger(2.0, 1e-5)
    inner = []

    def per_example_grad(theta, Xb, yb):
        if not inner:
            inner.append(None)
            inner[0] = _output(5.0)  # refused: the budget cannot afford ε = 5
        margins = yb * (Xb @ theta)
        return (-yb / (1.0 + np.exp(margins)))[:, None] * Xb

    with ledger.active(), pytest.raises(BudgetExceededError, match="output_perturbation"):
        dp_sgd.fit(None, X, Y, epsilon=1.0, delta=1e-6, clipping_norm=1.0, sampling="shuffle",
                   steps=4, batch_size=20, per_example_grad=per_example_grad,
                   theta0=np.zeros(D), random_state=0)  # fmt: skip
    assert inner == [None]  # nothing came back
    assert_released_charged(ledger, [SGD])  # the gradient function had seen the iterate


class FittingLoss(Logistic):
    """A custom loss whose derivative — called by the library with the margins of the
    current (private) iterate — fits another model once."""

    def __init__(self, epsilon):
        super().__init__()
        self.epsilon, self.inner = epsilon, []

    def derivative(self, z, y):
        if not self.inner:
            self.inner.append(None)
            self.inner[0] = _output(self.epsilon)
        return super().derivative(z, y)


def test_b2_a_fit_inside_a_custom_loss_is_charged():
    loss = FittingLoss(5.0)
    ledger = Ledger(2.0, 1e-5)
    with ledger.active(), pytest.raises(BudgetExceededError, match="output_perturbation"):
        dp_sgd.fit(loss, X, Y, epsilon=1.0, delta=1e-6, data_norm=1.0, sampling="shuffle",
                   steps=4, batch_size=20, random_state=0)  # fmt: skip
    assert loss.inner == [None]
    loss = FittingLoss(0.5)
    ledger = Ledger(3.0, 1e-5)
    with ledger.active():
        dp_sgd.fit(loss, X, Y, epsilon=1.0, delta=1e-6, data_norm=1.0, sampling="shuffle",
                   steps=4, batch_size=20, random_state=0)  # fmt: skip
    assert_released_charged(ledger, [SGD, OUTPUT])


def test_b2_a_fit_inside_the_search_scorer_is_charged():
    """PrivateRandomSearch charges the whole search once; its ``scoring`` is the user's:
    a fit inside it is charged like any other (measured at f2918d4: released)."""
    inner = []

    def scoring(y_true, y_pred):
        inner.append(_output(5.0))
        return (np.asarray(y_true) == np.asarray(y_pred)).astype(float)

    search = PrivateRandomSearch(
        dperm.DPLogisticRegression(classes=[-1, 1], mechanism="objective"),
        {"alpha": [0.01, 0.1]}, epsilon=1.0, delta=1e-6, mean_runs=2.0, scoring=scoring,
        random_state=0,
    )  # fmt: skip
    ledger = Ledger(2.0, 1e-5)
    with ledger.active():
        try:
            search.fit(X, Y)
        except BudgetExceededError as exc:
            assert "output_perturbation" in str(exc)
    assert inner == []
    assert_released_charged(ledger, ["PrivateRandomSearch"])


class MyLogistic(Logistic):
    """A loss class of the user's (it runs no fit)."""


def test_the_library_s_own_nested_calls_are_charged_once():
    """An estimator calling an algorithm, and ``fit_single_sample`` calling ``fit`` — with
    dperm's loss or one of the user's — still charge one entry each (the token the
    library sets around its own calls)."""
    ledger = Ledger(3.0, 1e-5)
    with ledger.active():
        dperm.DPLogisticRegression(epsilon=0.3, delta=1e-6, classes=[-1, 1],
                                   mechanism="dp-sgd", random_state=0).fit(X, Y)  # fmt: skip
        for loss in (Logistic(), MyLogistic()):
            dp_sgd.fit_single_sample(loss, X, Y, epsilon=0.5, delta=1e-6, data_norm=1.0,
                                     steps=20, random_state=0)  # fmt: skip
    assert charged(ledger) == Counter(
        {"DPLogisticRegression": 1, "algorithms.dp_sgd.fit_single_sample": 2}
    )
    assert [r.kind for r in ledger.records].count("reserve") == 3


# ======================================================= B3: processes that copy the budget
def _fit_in_worker(seed):
    """One estimator fit; returns ("released", coef) or ("refused", message)."""
    try:
        clf = dperm.DPLogisticRegression(epsilon=1.0, delta=1e-6, classes=[-1, 1],
                                         mechanism="objective", random_state=seed)  # fmt: skip
        return "released", clf.fit(X, Y).coef_
    except BudgetExceededError as exc:
        return "refused", str(exc)


def _outcomes(results):
    return Counter(kind for kind, _ in results)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_b3_workers_started_inside_an_in_memory_budget_are_refused(method):
    """3 fits at ε = 1 in a budget of 1.5, in a pool started inside the block: a worker
    cannot charge the parent's in-memory ledger, so it refuses (measured at f2918d4 with
    fork: all 3 released, the parent spent 0).  The same workers fit freely once the
    block has closed (their inherited marks are stale then)."""
    with dperm.budget(1.5, 1e-5) as ledger:
        pool = mp.get_context(method).Pool(1)  # started inside the block
        try:
            results = pool.map(_fit_in_worker, range(3))
        except BaseException:
            pool.terminate()
            raise
    with pool:
        after = pool.map(_fit_in_worker, range(1))  # the same worker, after the block
    assert _outcomes(results) == {"refused": 3}
    assert all("process" in msg for _, msg in results)
    assert_released_charged(ledger, [])
    assert _outcomes(after) == {"released": 1}


def test_b3_an_os_fork_inside_an_in_memory_budget_is_refused():
    with dperm.budget(1.5, 1e-5) as ledger:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(r)
            kind, _ = _fit_in_worker(0)
            os.write(w, kind.encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r) as fh:
            assert fh.read() == "refused"
    assert_released_charged(ledger, [])


def _fork_and_fit(ledger) -> tuple[str, bool]:
    """In a child forked inside ``ledger.active()``: one fit, and whether the child charged
    through the parent's very store object (a connection shared across the fork)."""
    store = ledger._store
    with ledger.active():
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(r)
            kind, _ = _fit_in_worker(0)
            os.write(w, f"{kind} {ledger._store is store}".encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r) as fh:
            kind, shared = fh.read().split()
    return kind, shared == "True"


def test_b3_a_fork_inside_a_budget_opened_on_a_store_object(tmp_path):
    """``Ledger.open(store)``: a memory store is this process's copy (the forked fit is
    refused, as for ``Ledger(ε, δ)``); a SQLite store is charged through the child's own
    connection, never the parent's (https://sqlite.org/howtocorrupt.html, 2.6)."""
    ledger = Ledger.open(MemoryStore(), epsilon=1.5, delta=1e-5)
    assert _fork_and_fit(ledger)[0] == "refused"
    assert_released_charged(ledger, [])
    ledger = Ledger.open(SqliteStore(tmp_path / "b.db", create=True), epsilon=1.5, delta=1e-5)
    assert _fork_and_fit(ledger) == ("released", False)
    assert_released_charged(ledger, ["DPLogisticRegression"])


def test_b3_forked_workers_of_a_stored_budget_charge_the_store(tmp_path):
    """A stored budget seen by a forked worker is charged there, through the worker's own
    connection: released ⇒ in the store."""
    path = _store(tmp_path, epsilon=1.5)
    with dperm.budget(path):
        with mp.get_context("fork").Pool(2) as pool:
            results = pool.map(_fit_in_worker, range(3))
    released = ["DPLogisticRegression"] * _outcomes(results)["released"]
    assert released
    assert_released_charged(path, released)


def test_b3_a_pool_started_before_the_block_is_refused(tmp_path):
    """Workers that existed before the block (a reused pool) have neither the budget's
    context nor its environment mark; they find the budget's process among their
    ancestors and refuse."""
    with mp.get_context("fork").Pool(2) as pool:
        pool.map(abs, range(2))  # the workers exist now
        for budget in (dperm.budget(1.5, 1e-5), dperm.budget(_store(tmp_path))):
            with budget as ledger:
                results = pool.map(_fit_in_worker, range(3))
            assert _outcomes(results) == {"refused": 3}
            assert_released_charged(ledger, [])
        assert _outcomes(pool.map(_fit_in_worker, range(1))) == {"released": 1}  # after it


def _fit_and_pid(seed):
    return _fit_in_worker(seed)[0], os.getpid()


def test_b3_a_loky_pool_reused_across_blocks():
    """joblib's loky executor outlives every block: its workers, started before the block,
    refuse inside it (they find the budget's marker among their ancestors) and fit
    freely after it — the same workers (the environment mark they carry is stale then)."""
    parallel = joblib.Parallel(n_jobs=2, backend="loky")
    before = parallel(joblib.delayed(_fit_and_pid)(s) for s in range(2))
    with dperm.budget(1.5, 1e-5) as ledger:
        inside = parallel(joblib.delayed(_fit_and_pid)(s) for s in range(2))
    after = parallel(joblib.delayed(_fit_and_pid)(s) for s in range(2))
    assert [k for k, _ in before] == ["released"] * 2 == [k for k, _ in after]
    assert [k for k, _ in inside] == ["refused"] * 2
    assert_released_charged(ledger, [])
    pids = {p for _, p in before}
    assert {p for _, p in inside} <= pids and {p for _, p in after} <= pids  # reused


def test_b3_a_process_pool_executor_forked_inside_an_in_memory_budget_is_refused():
    context = mp.get_context("fork")
    with dperm.budget(1.5, 1e-5) as ledger:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            results = list(pool.map(_fit_in_worker, range(2)))
    assert _outcomes(results) == {"refused": 2}
    assert_released_charged(ledger, [])


def _fit_in_store(path, seed):
    with dperm.budget(path):
        return _fit_in_worker(seed)[0], os.getpid()


def test_b3_a_worker_that_opens_the_stored_budget_itself_is_charged(tmp_path):
    """The way to fit in workers: each opens the store.  Refused only while the parent
    holds an in-memory budget (which the worker could not charge)."""
    path = _store(tmp_path, epsilon=3.0)
    parallel = joblib.Parallel(n_jobs=2, backend="loky")
    with dperm.budget(path):
        results = parallel(joblib.delayed(_fit_in_store)(path, s) for s in range(2))
    assert [k for k, _ in results] == ["released"] * 2
    assert_released_charged(path, ["DPLogisticRegression"] * 2)
    with dperm.budget(3.0, 1e-5) as ledger:
        results = parallel(joblib.delayed(_fit_in_store)(path, s) for s in range(2))
    assert [k for k, _ in results] == ["refused"] * 2
    assert_released_charged(ledger, [])
    assert len(Ledger.open(path).entries) == 2


# ============================================ GridSearchCV(n_jobs=2) with each joblib backend
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.FitFailedWarning")
@pytest.mark.parametrize("backend", ["loky", "threading", "multiprocessing"])
@pytest.mark.parametrize("kept", ["memory", "store"])
def test_gridsearch_with_each_joblib_backend(backend, kept, tmp_path):
    """4 fold fits + the refit, each ε = 0.2: in a worker that cannot charge the budget the
    fit is refused (a NaN score; all of them refused, the search raises); where the search
    completes, every fit is charged."""
    location = _store(tmp_path, epsilon=3.0) if kept == "store" else None
    budget = dperm.budget(location) if location else dperm.budget(3.0, 1e-5)
    grid = GridSearchCV(
        dperm.DPLogisticRegression(epsilon=0.2, delta=1e-7, classes=[-1, 1], mechanism="objective"),
        {"alpha": [0.01, 0.1]}, cv=2, n_jobs=2,
    )  # fmt: skip
    with budget as ledger, joblib.parallel_config(backend=backend):
        try:
            grid.fit(X, Y)
            finished = True
        except ValueError as exc:  # scikit-learn: "All the 4 fits failed", with the reason
            assert "is refused" in str(exc)
            finished = False
    if backend == "multiprocessing" and kept == "store":
        assert finished  # forked workers reach the store: counted
    if backend in ("loky", "threading") or kept == "memory":
        assert not finished  # refused, never silently uncounted
    released = ["DPLogisticRegression"] * 5 if finished else []
    assert_released_charged(location or ledger, released)


# =============================================================== W1: threads and asyncio
def _thread_fit(results):
    results.append(_fit_in_worker(0))


def test_w1_fits_in_the_user_s_threads_are_refused():
    with dperm.budget(3.0, 1e-5) as ledger:
        results = []
        t = threading.Thread(target=_thread_fit, args=(results,))
        t.start()
        t.join()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results += list(pool.map(_fit_in_worker, range(2)))
        joblib_results = joblib.Parallel(n_jobs=2, backend="threading")(
            joblib.delayed(_fit_in_worker)(i) for i in range(2)
        )
    assert _outcomes(results + joblib_results) == {"refused": 5}
    assert all("thread" in msg for _, msg in results + joblib_results)
    assert_released_charged(ledger, [])
    # outside every block the same thread fits freely
    results = []
    t = threading.Thread(target=_thread_fit, args=(results,))
    t.start()
    t.join()
    assert _outcomes(results) == {"released": 1}


def test_w1_a_thread_given_the_context_is_counted():
    with dperm.budget(3.0, 1e-5) as ledger:
        ctx = contextvars.copy_context()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda s: ctx.copy().run(_fit_in_worker, s), range(2)))
    assert _outcomes(results) == {"released": 2}
    assert_released_charged(ledger, ["DPLogisticRegression"] * 2)


def test_w1_asyncio_tasks_copy_the_context_and_are_counted():
    async def main():
        with dperm.budget(6.0, 1e-5) as ledger:
            loop = asyncio.get_running_loop()
            tasks = [loop.create_task(asyncio.to_thread(_fit_in_worker, s)) for s in range(2)]

            async def in_task(seed):
                return _fit_in_worker(seed)

            results = await asyncio.gather(*tasks, in_task(2), in_task(3))
        return ledger, results

    ledger, results = asyncio.run(main())
    assert _outcomes(results) == {"released": 4}
    assert_released_charged(ledger, ["DPLogisticRegression"] * 4)


# ================================================ B4: an exception after a release attribute
def test_b4_a_warning_raised_as_an_error_releases_nothing_uncharged():
    """classes=None warns PrivacyLeakWarning; as an error it used to come after ``coef_``
    was set, and the reservation was cancelled while the estimator kept ``coef_``."""
    ledger = Ledger(3.0, 1e-5)
    clf = dperm.DPLogisticRegression(epsilon=0.5, delta=1e-6, mechanism="objective")
    with ledger.active(), warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        with pytest.raises(PrivacyLeakWarning):
            clf.fit(X, Y)
    released = ["DPLogisticRegression"] if hasattr(clf, "coef_") else []
    assert not hasattr(clf, "coef_")  # nothing assigned before the warning
    assert_released_charged(ledger, released)
    # a warning about a parameter (classes=None), before any release: the refund tells nothing
    assert [r.kind for r in ledger.records][-2:] == ["reserve", "cancel"]


def test_b4_an_interrupt_while_the_release_is_assigned_keeps_it_charged(monkeypatch):
    from dperm.estimators import _base

    def interrupted(self):
        raise KeyboardInterrupt  # right after coef_ and intercept_ are set

    monkeypatch.setattr(_base.DPLinearModelBase, "_finish_shapes", interrupted)
    ledger = Ledger(3.0, 1e-5)
    clf = dperm.DPLogisticRegression(
        epsilon=0.5, delta=1e-6, classes=[-1, 1], mechanism="objective"
    )
    with ledger.active(), pytest.raises(KeyboardInterrupt):
        clf.fit(X, Y)
    released = ["DPLogisticRegression"] if hasattr(clf, "coef_") else []
    assert_released_charged(ledger, released)


def test_b4_the_network_estimator():
    pytest.importorskip("torch")
    ledger = Ledger(3.0, 1e-5)
    clf = dperm.DPMLPClassifier((4,), epsilon=0.5, delta=1e-6, epochs=1, random_state=0)
    with ledger.active(), warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        with pytest.raises(PrivacyLeakWarning):
            clf.fit(X.astype(np.float32), (Y > 0).astype(int))
    released = [a for a in ("coefs_", "pca_components_", "input_scales_") if hasattr(clf, a)]
    assert released == []
    assert_released_charged(ledger, ["DPMLPClassifier"] if released else [])


def test_b4_the_network_estimator_keeps_no_private_pca_after_a_failed_training(monkeypatch):
    pytest.importorskip("torch")
    from dperm.estimators import mlp

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # the private PCA is done, the training is not

    monkeypatch.setattr(mlp, "fit", interrupted)
    ledger = Ledger(3.0, 1e-5)
    clf = dperm.DPMLPClassifier((4,), epsilon=0.5, delta=1e-6, epochs=1, classes=[0, 1],
                                n_components=2, random_state=0)  # fmt: skip
    with ledger.active(), pytest.raises(KeyboardInterrupt):
        clf.fit(X.astype(np.float32), (Y > 0).astype(int))
    released = [a for a in ("coefs_", "pca_components_", "input_scales_") if hasattr(clf, a)]
    assert_released_charged(ledger, ["DPMLPClassifier"] if released else [])


# ======================================================= W2: refusals that depend on the data
def test_w2_a_data_refusal_after_the_reservation_keeps_it_charged():
    """A NaN row found by an algorithm function after its reservation: whether the data
    has one is a fact about the data, so the reservation is not refunded (a refund would
    tell it for free).  The estimators check their data before they reserve."""
    Xn = X.copy()
    Xn[7, 1] = np.nan
    ledger = Ledger(3.0, 1e-5)
    with ledger.active(), pytest.raises(InvalidDataError, match="NaN"):
        _output(0.5, X=Xn)
    assert [r.kind for r in ledger.records][-2:] == ["reserve", "commit"]
    assert "cancel" not in [r.kind for r in ledger.records]
    before = len(ledger.records)
    with ledger.active(), pytest.raises(InvalidDataError, match="NaN"):
        dperm.DPLogisticRegression(epsilon=0.5, delta=1e-6, classes=[-1, 1]).fit(Xn, Y)
    assert len(ledger.records) == before  # refused before its reservation: nothing recorded


# ================================================ suspension: only by who charged the whole cost
def test_suspending_a_budget_needs_its_covering_charge():
    """``suspended`` lets a composite run inner fits uncharged once it charged their whole
    cost; it is not an escape hatch: a block that charged nothing cannot suspend a budget,
    and the fit it would have hidden is refused with nothing released."""
    from dperm.accounting.active import charge, fit_scope, suspended
    from dperm.accounting.events import EpsilonDelta

    ledger = Ledger(epsilon=1.5, delta=1e-5)
    with ledger.active():
        with pytest.raises(BudgetExceededError, match="not charged by the code"):
            with suspended(()):
                _output(1.0)  # would have been released uncharged
        assert charged(ledger) == Counter()
        other = Ledger(epsilon=1.0, delta=1e-5)
        with other.active(), fit_scope():
            covering = charge(EpsilonDelta(0.5, 0.0), "composite")
            assert {r.ledger for r in covering} == {ledger, other}
            with suspended(covering):
                _output(0.5)  # covered by "composite": not charged again
        with fit_scope():
            only_outer = charge(EpsilonDelta(0.2, 0.0), "partial")
            with other.active(), pytest.raises(BudgetExceededError, match="not charged"):
                with suspended(only_outer):  # `other` holds no reservation of the block
                    _output(0.5)
    assert charged(ledger) == Counter({"composite": 1, "partial": 1})
    assert charged(other) == Counter({"composite": 1})
