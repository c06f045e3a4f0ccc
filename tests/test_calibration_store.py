"""The persistent calibration cache: a hit skips the search, and nothing read from the
file is trusted — an edited entry can never make a run spend more than its ε."""

from __future__ import annotations

import json

import pytest

from dperm.accounting import pld as pld_module
from dperm.algorithms import _calibration_store as store
from dperm.algorithms import _gradient_calibration as gc
from dperm.sampling import make_sampler

EPS, DELTA, STEPS = 0.8, 1e-5, 40


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DPERM_CACHE_DIR", str(tmp_path))
    gc._CALIBRATION_CACHE.clear()
    gc._EPSILON_CACHE.clear()
    return tmp_path / "calibration.json"


def _resolve(sampler, epsilon=EPS):
    gc._CALIBRATION_CACHE.clear()  # a fresh process: only the file survives
    gc._EPSILON_CACHE.clear()
    return gc.resolve_noise(
        sampler, STEPS, epsilon=epsilon, delta=DELTA, noise_multiplier=None, accountant="pld"
    )


def _counting(monkeypatch):
    """The grid of every PLD the accountant builds from now on."""
    built = []
    build = pld_module.PldAccountant._build

    def counting(self, terms, count):
        built.append(self.value_discretization_interval)
        return build(self, terms, count)

    monkeypatch.setattr(pld_module.PldAccountant, "_build", counting)
    return built


def test_a_hit_is_reverified_by_one_evaluation_and_gives_the_same_noise(cache, monkeypatch):
    sampler = make_sampler("poisson", 2_000, batch_size=100)
    z, _, spent = _resolve(sampler)
    assert cache.is_file() and list(json.loads(cache.read_text()).values()) == [z]
    built = _counting(monkeypatch)
    z2, _, spent2 = _resolve(sampler)
    assert z2 == z and spent2 == pytest.approx(spent, rel=1e-12)
    assert built == [gc.pld_grid(EPS)]  # one PLD: the re-verification, no search


@pytest.mark.parametrize("factor", [0.5, 1.5, float("nan")])
def test_an_edited_entry_is_never_trusted(cache, monkeypatch, factor):
    """A smaller z (would overspend), a larger one (would waste the budget) or garbage:
    the entry fails the re-verification and the search runs again."""
    sampler = make_sampler("poisson", 2_000, batch_size=100)
    z, _, _ = _resolve(sampler)
    data = json.loads(cache.read_text())
    (key,) = data
    data[key] = z * factor
    cache.write_text(json.dumps(data))
    z2, event, spent = _resolve(sampler)
    assert z2 == pytest.approx(z, rel=1e-9)  # calibrated afresh
    assert (1 - gc.CALIBRATION_RTOL) * EPS <= spent <= EPS
    assert gc.epsilon_of(event, DELTA, "pld") <= EPS


def test_the_key_holds_every_public_input(cache):
    a = make_sampler("poisson", 2_000, batch_size=100)
    b = make_sampler("poisson", 2_000, batch_size=101)
    c = make_sampler("without_replacement", 2_000, batch_size=100)
    zs = {_resolve(s)[0] for s in (a, b, c)} | {_resolve(a, epsilon=0.9)[0]}
    assert len(zs) == 4 and len(json.loads(cache.read_text())) == 4


def test_a_corrupt_or_unwritable_cache_is_ignored(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    path.write_text("{not json")
    monkeypatch.setenv("DPERM_CACHE_DIR", str(tmp_path))
    assert store.load("anything") is None
    store.store("k", 1.5)
    assert store.load("k") == 1.5
    monkeypatch.setenv("DPERM_CACHE_DIR", str(path / "inside-a-file"))
    store.store("k", 2.0)  # cannot create the directory: silently nothing
    assert store.load("k") is None
    monkeypatch.setenv("DPERM_CACHE_DIR", "")
    assert store.cache_path() is None and store.load("k") is None
