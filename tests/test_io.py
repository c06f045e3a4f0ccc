"""dperm.save / dperm.load (JSON + .npy in a zip, never pickle), privacy
statements, ``dperm --version`` and ``dperm fit --save``."""

from __future__ import annotations

import importlib.metadata
import io as _io
import json
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

import dperm
from dperm import DPLinearRegression, DPLinearSVC, DPLogisticRegression
from dperm.cli import main
from dperm.constraints import get_constraint
from dperm.exceptions import DataFileNotFoundError
from dperm.io import ModelFileError, read_metadata


# ----------------------------------------------------------------------------- data
def _rows(seed: int, n: int, d: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / 2
    return X * (0.99 / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0))


@pytest.fixture(scope="module")
def binary():
    X = _rows(0, 400, 4)
    return X, np.where(X[:, 0] - X[:, 1] > 0, 1, 0)


@pytest.fixture(scope="module")
def multiclass():
    X = _rows(1, 450, 3)
    W = np.array([[1.0, 0, -1], [0, 1, -1], [1, 1, 0]])
    return X, np.array(["cat", "dog", "eel"])[np.argmax(X @ W, axis=1)]


@pytest.fixture(scope="module")
def regression():
    X = _rows(2, 400, 3)
    return X, np.clip(X @ np.array([0.5, -0.3, 0.2]), -1, 1)


CASES = [
    ("binary", DPLogisticRegression(epsilon=1.0, random_state=3)),
    ("binary", DPLogisticRegression(epsilon=1.0, delta=0.0, classes=[0, 1], random_state=3)),
    (
        "binary",
        DPLogisticRegression(epsilon=2.0, mechanism="output", classes=[0, 1], random_state=3),
    ),
    ("multiclass", DPLogisticRegression(epsilon=3.0, random_state=4)),  # classes from y
    (
        "multiclass",
        DPLogisticRegression(
            epsilon=3.0,
            mechanism="dp-gd",
            multi_class="multinomial",
            epochs=5,
            classes=["cat", "dog", "eel"],
            random_state=4,
        ),
    ),
    (
        "binary",
        DPLinearSVC(epsilon=1.0, mechanism="output", delta=0.0, classes=[0, 1], random_state=5),
    ),
    ("binary", DPLinearSVC(epsilon=1.0, h=0.3, classes=[0, 1], random_state=5)),
    ("regression", DPLinearRegression(epsilon=1.0, random_state=6)),  # the default mechanism
    (
        "regression",
        DPLinearRegression(
            epsilon=1.0, mechanism="objective", constraint_radius=4.0, random_state=6
        ),
    ),
    (
        "regression",
        DPLinearRegression(
            epsilon=1.0, delta=0.0, mechanism="output", constraint_radius=4.0, random_state=6
        ),
    ),
]


# classes=None (read off y) warns PrivacyLeakWarning; some cases do it on purpose
_LEAK_OK = pytest.mark.filterwarnings("ignore::dperm.exceptions.PrivacyLeakWarning")


@_LEAK_OK
@pytest.mark.parametrize(("data", "model"), CASES, ids=lambda v: getattr(v, "mechanism", v))
def test_round_trip_predicts_identically(data, model, request, tmp_path):
    X, y = request.getfixturevalue(data)
    model.fit(X, y)
    path = dperm.save(model, tmp_path / "m.dperm")
    loaded = dperm.load(path)
    assert type(loaded) is type(model)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    np.testing.assert_array_equal(loaded.intercept_, model.intercept_)
    if hasattr(model, "decision_function"):
        np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
        np.testing.assert_array_equal(loaded.classes_, model.classes_)
        assert loaded.classes_.dtype == model.classes_.dtype
    if hasattr(model, "predict_proba"):
        np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    else:
        assert loaded.score(X, y) == model.score(X, y)
    assert loaded.dp_event_ == model.dp_event_
    assert (loaded.epsilon_, loaded.delta_) == (model.epsilon_, model.delta_)
    assert loaded.privacy_statement() == model.privacy_statement()
    with zipfile.ZipFile(path) as zf:
        assert zf.read("privacy_statement.txt").decode() == model.privacy_statement()
    # parameters survive, except the seed of the noise (never written)
    expected = {**model.get_params(), "random_state": None}
    got = loaded.get_params()
    assert got.keys() == expected.keys()
    for k, v in expected.items():
        assert np.array_equal(np.asarray(got[k]), np.asarray(v)), k
    # data-dependent diagnostics are not released
    for attr in ("n_clipped_", "diagnostics_", "n_iter_"):
        assert not hasattr(loaded, attr)


@_LEAK_OK
def test_metadata_carries_the_privacy_facts(binary, tmp_path):
    X, y = binary
    clf = DPLogisticRegression(
        epsilon=0.7, data_norm=1.5, mechanism="objective", random_state=11
    ).fit(X, y)
    meta = read_metadata(dperm.save(clf, tmp_path / "m.dperm"))
    assert meta["dperm_version"] == dperm.__version__
    assert meta["estimator"] == "DPLogisticRegression"
    priv = meta["privacy"]
    assert priv["epsilon"] == 0.7 and priv["delta"] == pytest.approx(1 / 400**2)
    assert priv["mechanism"] == "objective" and priv["neighbouring"] == "replace-one"
    assert priv["public_bounds"]["data_norm"] == 1.5
    assert priv["public_bounds"]["effective_row_bound"] == pytest.approx(np.hypot(1.5, 0.5))
    assert priv["classes_public"] is False
    assert dperm.accounting.event_from_dict(priv["event"]) == clf.dp_event_
    assert "random_state" not in meta["params"]
    assert "11" not in json.dumps(meta["params"])


@_LEAK_OK
def test_the_file_is_plain_npz_without_pickle(multiclass, tmp_path):
    X, y = multiclass
    clf = DPLogisticRegression(epsilon=2.0, random_state=0).fit(X, y.astype(object))
    path = dperm.save(clf, tmp_path / "m.dperm")
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files if k in ("coef_", "intercept_", "classes_")}
    assert set(arrays) == {"coef_", "intercept_", "classes_"}
    np.testing.assert_array_equal(arrays["coef_"], clf.coef_)
    assert arrays["classes_"].dtype.kind == "U"  # object labels stored as unicode
    loaded = dperm.load(path)
    assert loaded.classes_.dtype == object  # and restored as scikit-learn had them
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))


_EXECUTED: list[str] = []


def _record(message: str) -> None:
    _EXECUTED.append(message)


class _Payload:
    """Unpickling this object calls :func:`_record` (pickled by reference): it
    records that code from the file was executed."""

    def __reduce__(self):
        return (_record, ("pickle code ran",))


def _rewrite(path, tmp_path, *, meta_update=None, extra=None):
    """A copy of the model file with the metadata changed / members added or replaced."""
    out = tmp_path / "tampered.dperm"
    extra = extra or {}
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            if name in extra:
                continue
            data = src.read(name)
            if name == "dperm.json" and meta_update is not None:
                meta = json.loads(data)
                meta_update(meta)
                data = json.dumps(meta).encode()
            dst.writestr(name, data)
        for name, data in extra.items():
            dst.writestr(name, data)
    return out


@pytest.fixture
def saved(binary, tmp_path):
    X, y = binary
    clf = DPLogisticRegression(classes=[0, 1], random_state=0)
    return dperm.save(clf.fit(X, y), tmp_path / "m.dperm")


@pytest.mark.parametrize(
    "cls_name", ["LogisticRegression", "os.system", "DPLinearModelBase", "builtins.eval"]
)
def test_a_class_outside_the_allow_list_is_refused(saved, tmp_path, cls_name):
    def upd(m):
        m["estimator"] = cls_name

    with pytest.raises(ModelFileError, match="allow-list"):
        dperm.load(_rewrite(saved, tmp_path, meta_update=upd))


def test_a_pickled_array_is_refused_without_unpickling(saved, tmp_path):
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.array([_Payload()], dtype=object), allow_pickle=True)

    bad = _rewrite(saved, tmp_path, extra={"coef_.npy": buf.getvalue()})  # swap coef_
    _EXECUTED.clear()
    with pytest.raises(ModelFileError, match="pickle"):
        dperm.load(bad)
    assert _EXECUTED == []
    # an array under a name outside the allow-list is refused before it is read

    def upd(m):
        m["arrays"] = [*m["arrays"], "evil_"]

    bad = _rewrite(saved, tmp_path, meta_update=upd, extra={"evil_.npy": buf.getvalue()})
    with pytest.raises(ModelFileError, match="evil_"):
        dperm.load(bad)
    assert _EXECUTED == []
    # the payload is live: reading it with pickle allowed would have run it
    np.lib.format.read_array(_io.BytesIO(buf.getvalue()), allow_pickle=True)
    assert _EXECUTED == ["pickle code ran"]


@pytest.mark.parametrize(
    ("update", "needle"),
    [
        (lambda m: m["params"].update(not_a_param=1), "unknown parameters"),
        (lambda m: m.update(format_version=99), "format_version"),
        (lambda m: m.update(format="pickle"), "not a dperm model"),
        (lambda m: m["attributes"].update(__class__="x"), "attribute name"),
        (lambda m: m["privacy"].update(event={"kind": "Nope"}), "privacy event"),
        (lambda m: m["params"].update(mechanism=["objective"]), "mechanism"),
    ],
)
def test_tampered_metadata_is_refused(saved, tmp_path, update, needle):
    with pytest.raises(ModelFileError, match=needle):
        dperm.load(_rewrite(saved, tmp_path, meta_update=update))


def test_unexpected_members_are_refused(saved, tmp_path):
    with pytest.raises(ModelFileError, match="unexpected members"):
        dperm.load(_rewrite(saved, tmp_path, extra={"model.pkl": b"\x80\x04."}))


def test_load_bad_paths(tmp_path):
    with pytest.raises(DataFileNotFoundError, match=r"nope\.dperm"):
        dperm.load(tmp_path / "nope.dperm")
    junk = tmp_path / "junk.dperm"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match="not a zip"):
        dperm.load(junk)


@pytest.mark.parametrize("bad", [None, 3, b"m.dperm", ["m.dperm"]])
def test_load_of_a_non_path_is_a_model_file_error(bad):
    for read in (dperm.load, read_metadata):
        with pytest.raises(ModelFileError, match="path must be a model file's name"):
            read(bad)


def _flipped_coef(path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        coef = np.lib.format.read_array(_io.BytesIO(zf.read("coef_.npy")), allow_pickle=False)
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, -coef, allow_pickle=False)
    return buf.getvalue()


def test_a_current_file_without_its_digest_is_refused_not_read_as_legacy(binary, saved, tmp_path):
    """Issue #37: a sign-flipped coef_ with content_sha256 removed used to load through
    the no-digest path of older files and predict the flipped labels silently."""
    assert read_metadata(saved)["format_version"] == 3 and "content_sha256" in read_metadata(saved)
    flipped = {"coef_.npy": _flipped_coef(saved)}
    with pytest.raises(ModelFileError, match="modified after it was written"):
        dperm.load(_rewrite(saved, tmp_path, extra=flipped))
    stripped = _rewrite(
        saved, tmp_path, meta_update=lambda m: m.pop("content_sha256"), extra=flipped
    )
    with pytest.raises(ModelFileError, match=r"no content_sha256 .* format_version 3"):
        dperm.load(stripped)


def test_a_version_2_file_without_a_digest_loads_with_a_warning(binary, saved, tmp_path):
    """Files written before the digest (format_version 1–2) still load — and say that their
    content cannot be checked; the same file stated as version 3 is refused."""
    X, _ = binary

    def legacy(m):
        del m["content_sha256"]
        m["format_version"] = 2

    old = _rewrite(saved, tmp_path, meta_update=legacy)
    with pytest.warns(UserWarning, match="before dperm model files carried a content digest"):
        model = dperm.load(old)
    np.testing.assert_array_equal(model.predict(X), dperm.load(saved).predict(X))


def test_save_refuses_what_it_cannot_write_safely(binary, tmp_path):
    X, y = binary
    with pytest.raises(ModelFileError, match="only dperm estimators"):
        dperm.save(LogisticRegression().fit(X, y), tmp_path / "a")
    ball = DPLogisticRegression(constraint=get_constraint("l2", 5.0), classes=[0, 1])
    with pytest.raises(NotFittedError):
        dperm.save(DPLogisticRegression(), tmp_path / "b")
    ball = ball.set_params(random_state=0).fit(X, y)
    with pytest.raises(ModelFileError, match="constraint"):
        dperm.save(ball, tmp_path / "c")
    assert not list(tmp_path.iterdir())  # nothing half-written


# ----------------------------------------------------------------------------- statement
@_LEAK_OK
def test_statement_says_what_is_and_is_not_covered(binary, multiclass):
    X, y = binary
    clf = DPLogisticRegression(epsilon=0.5, delta=1e-6, mechanism="objective", random_state=0).fit(
        X, y
    )
    text = clf.privacy_statement()
    assert text == dperm.privacy_statement(clf)
    assert "ε = 0.5" in text and "δ = 1e-06" in text
    assert "replace-one" in text and "one training record" in text
    assert "Kifer, Smith, Thakurta 2012" in text
    assert "data_norm = 1.0" in text
    for caveat in ("classes_ was read", "n_clipped_", "hyperparameter tuning", "floating-point"):
        assert caveat in text
    # public classes: the label-set caveat disappears; pure ε: no δ, the Gamma theorem
    pure = DPLogisticRegression(epsilon=0.5, delta=0.0, classes=[0, 1], random_state=0)
    text = pure.fit(X, y).privacy_statement()
    assert "classes_ was read" not in text and "δ =" not in text
    assert "ε-differentially private" in text and "Chaudhuri, Monteleoni, Sarwate 2011" in text
    # one-vs-rest: the split is stated
    X3, y3 = multiclass
    ovr = DPLogisticRegression(epsilon=3.0, multi_class="ovr", random_state=0)
    text = ovr.fit(X3, y3).privacy_statement()
    assert "3 one-vs-rest problems" in text and "Thm 3.16" in text


def test_statement_names_the_accountant_of_gradient_mechanisms(binary):
    X, y = binary
    for acc, needle in (("rdp", "Rényi-DP accountant"), ("pld", "privacy-loss-distribution")):
        clf = DPLogisticRegression(
            mechanism="dp-gd", epochs=3, accountant=acc, classes=[0, 1], random_state=0
        )
        text = clf.fit(X, y).privacy_statement()
        assert needle in text and "Bassily, Smith, Thakurta 2014" in text


def test_statement_needs_a_fitted_dperm_model():
    with pytest.raises(NotFittedError):
        DPLinearSVC().privacy_statement()
    with pytest.raises(ModelFileError):
        dperm.privacy_statement(LogisticRegression())


# ----------------------------------------------------------------------------- version and CLI
def test_version_is_the_installed_distribution_version(capsys):
    assert dperm.__version__ == importlib.metadata.version("dperm")
    try:
        code = main(["--version"])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    assert code in (0, None) and out.out.strip() == f"dperm {dperm.__version__}"


def test_cli_fit_save_writes_a_loadable_model(tmp_path, capsys):
    path = tmp_path / "m.dperm"
    try:
        code = main(["fit", "--save", str(path), "--json", "--seed", "0"])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    assert code in (0, None), out.err
    result = json.loads(out.out)
    assert result["saved_model"] == str(path)
    model = dperm.load(path)
    assert model.dp_event_.to_dict() == result["dp_event"]
    assert (model.epsilon_, model.delta_) == (result["epsilon"], result["delta"])
    statement = (tmp_path / "m.dperm.privacy.txt").read_text(encoding="utf-8")
    assert statement == model.privacy_statement()
    from dperm import datasets

    ds = datasets.load(datasets.DEFAULT_DATASET)
    assert model.score(ds.X_test, ds.y_test) == pytest.approx(result["test_accuracy"])


def test_cli_fit_save_into_a_missing_folder_is_one_line(tmp_path, capsys):
    try:
        code = main(["fit", "--save", str(tmp_path / "no" / "m.dperm"), "--json"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--save" in err


def test_round_trip_keeps_feature_names(regression, tmp_path):
    import pandas as pd

    X, y = regression
    df = pd.DataFrame(X, columns=["age", "income", "score"])
    reg = DPLinearRegression(epsilon=1.0, random_state=0).fit(df, y)
    loaded = dperm.load(dperm.save(reg, tmp_path / "r.dperm"))
    np.testing.assert_array_equal(loaded.feature_names_in_, reg.feature_names_in_)
    assert loaded.feature_names_in_.dtype == object
    np.testing.assert_array_equal(loaded.predict(df), reg.predict(df))  # no name warning


def test_a_model_from_a_private_search_says_so(tmp_path):
    from dperm.model_selection import tuning_search

    X = _rows(8, 1500, 3)
    y = np.where(X[:, 0] > 0, 1, -1)
    est = DPLogisticRegression(
        epsilon=2.0, delta=1e-6, classes=[-1, 1], mechanism="objective", random_state=0
    )
    best = tuning_search(est).fit(X, y).best_estimator_
    loaded = dperm.load(dperm.save(best, tmp_path / "tuned.dperm"))
    assert loaded.run_dp_event_ == best.run_dp_event_
    assert loaded.dp_event_ == best.dp_event_
    text = loaded.privacy_statement()
    assert text == best.privacy_statement()
    assert "private hyperparameter search" in text
    assert best.run_dp_event_.to_json() in text and best.dp_event_.to_json() in text
    # the mechanism is named after the selected run's own event, not the search's δ
    # (tuning_search runs objective perturbation pure-ε and spends δ in the search analysis)
    assert best.run_dp_event_.to_dict()["kind"] == "PureEpsilon" and best.delta_ > 0
    assert "Gamma-norm noise" in text


def test_caveats_lead_the_statement_and_survive_the_file(binary, tmp_path):
    X, y = binary
    clf = DPLogisticRegression(classes=[0, 1], random_state=0).fit(X, y)
    clf.privacy_caveats_ = ("bounds were read from the data: the guarantee does not hold",)
    text = clf.privacy_statement()
    assert text.splitlines()[2] == (
        "WARNING. bounds were read from the data: the guarantee does not hold."
    )
    loaded = dperm.load(dperm.save(clf, tmp_path / "m.dperm"))
    assert loaded.privacy_caveats_ == clf.privacy_caveats_
    assert loaded.privacy_statement() == text
    clf.privacy_caveats_ = "not a list"
    with pytest.raises(ModelFileError, match="privacy_caveats_"):
        clf.privacy_statement()


def test_statement_follows_the_relation_of_the_event(binary, tmp_path):
    from dperm.accounting.events import ADD_REMOVE, EpsilonDelta

    X, y = binary
    clf = DPLogisticRegression(classes=[0, 1], random_state=0).fit(X, y)
    assert "replace-one" in clf.privacy_statement()
    clf.dp_event_ = EpsilonDelta(1.0, 1e-6, neighbouring=ADD_REMOVE)
    clf.neighbouring_ = ADD_REMOVE  # as fit sets it: read off the event
    text = clf.privacy_statement()
    assert "add/remove-one" in text and "replace-one" not in text
    loaded = dperm.load(dperm.save(clf, tmp_path / "ar.dperm"))
    assert loaded.dp_event_.neighbouring == ADD_REMOVE
    assert read_metadata(tmp_path / "ar.dperm")["privacy"]["neighbouring"] == ADD_REMOVE


@_LEAK_OK
@pytest.mark.parametrize("name", sorted(dperm.io._allowed_classes()))
def test_every_allow_listed_estimator_round_trips_with_its_defaults(
    name, binary, regression, tmp_path
):
    from sklearn.base import is_classifier

    cls = dperm.io._allowed_classes()[name]
    X, y = binary if is_classifier(cls()) else regression
    model = cls(random_state=0).fit(X, y)
    loaded = dperm.load(dperm.save(model, tmp_path / f"{name}.dperm"))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.dp_event_ == model.dp_event_
    assert loaded.privacy_statement() == model.privacy_statement()
    assert "registered mechanism" not in model.privacy_statement()  # its theorem is named


@_LEAK_OK
def test_only_allow_listed_attributes_are_written(binary, tmp_path):
    X, y = binary
    clf = DPLogisticRegression(random_state=0).fit(X, y)
    clf.secret_diagnostic_ = np.arange(3.0)  # e.g. a new, data-dependent attribute
    path = dperm.save(clf, tmp_path / "m.dperm")
    meta = read_metadata(path)
    assert {"n_clipped_", "diagnostics_", "n_iter_", "secret_diagnostic_"} <= set(meta["not_saved"])
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert "secret_diagnostic_.npy" not in names and "n_iter_.npy" not in names
    assert set(meta["arrays"]) | set(meta["attributes"]) <= set(dperm.io._SAVED_ATTRIBUTES)


def test_cli_fit_save_table_prints_the_statement(tmp_path, capsys):
    path = tmp_path / "t.dperm"
    try:
        code = main(["fit", "--save", str(path), "--seed", "1"])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr().out
    assert code in (0, None)
    assert "Privacy statement for DPLogisticRegression" in out
    assert dperm.load(path).privacy_statement().splitlines()[2] in out
    assert f"model saved to {path}" in out


# ------------------------------------------------------------- pipelines and norms (#13)
def test_a_pipeline_of_dperm_steps_round_trips_with_its_composed_statement(tmp_path):
    from sklearn.pipeline import make_pipeline

    from dperm.accounting import Composed
    from dperm.preprocessing import (
        DPStandardScaler,
        PublicMinMaxScaler,
        PublicOneHotEncoder,
        RowNormalizer,
        pipeline_dp_event,
    )

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 10, 600), rng.uniform(-5, 5, 600)])
    y = (X[:, 0] - 2 * X[:, 1] > 5).astype(int)
    pipe = make_pipeline(
        PublicMinMaxScaler(bounds=[(0, 10), (-5, 5)], feature_range=(-1, 1)),
        DPStandardScaler(epsilon=0.5, delta=0.0, bounds=(-1, 1), random_state=0),
        "passthrough",
        RowNormalizer(norm=1.0),
        DPLogisticRegression(epsilon=1.0, classes=[0, 1], random_state=0),
    ).fit(X, y)
    path = dperm.save(pipe, tmp_path / "pipe.skops")  # the done-when file name is accepted
    loaded = dperm.load(path)
    assert [type(s).__name__ for _, s in loaded.steps] == [
        type(s).__name__ if not isinstance(s, str) else "str" for _, s in pipe.steps
    ]
    np.testing.assert_array_equal(loaded.predict(X), pipe.predict(X))
    np.testing.assert_allclose(loaded.predict_proba(X), pipe.predict_proba(X))
    event = pipeline_dp_event(pipe)
    assert isinstance(event, Composed) and pipeline_dp_event(loaded) == event
    meta = read_metadata(path)
    assert meta["kind"] == "pipeline" and meta["format_version"] == 3
    assert meta["privacy"]["event"] == event.to_dict()
    assert meta["privacy"]["delta"] == pytest.approx(pipe[-1].delta_)
    # the composed ε: at least the two private steps' ε (0.5 + the model's), certified
    assert meta["privacy"]["epsilon"] <= 1.5 + 1e-6
    statement = dperm.privacy_statement(pipe)
    assert statement == dperm.privacy_statement(loaded)
    assert "DPStandardScaler" in statement and "spends nothing" in statement
    with zipfile.ZipFile(path) as zf:
        assert zf.read("privacy_statement.txt").decode() == statement
        names = zf.namelist()
    assert "step1__mean_.npy" in names and not any("n_clipped" in n for n in names)
    # a one-hot encoder with string categories (a list of arrays) round-trips too
    cats = make_pipeline(
        PublicOneHotEncoder(categories=[["a", "b", "c"]]),
        DPLogisticRegression(epsilon=1.0, classes=[0, 1], random_state=0),
    )
    Xc = rng.choice(np.array(["a", "b", "c"], dtype=object), size=(300, 1))
    yc = (Xc[:, 0] == "a").astype(int)
    cats.fit(Xc, yc)
    back = dperm.load(dperm.save(cats, tmp_path / "cats.dperm"))
    np.testing.assert_array_equal(back.predict(Xc), cats.predict(Xc))


def test_a_pipeline_with_a_leaking_step_is_refused(tmp_path):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = _rows(3, 200, 2)
    y = (X[:, 0] > 0).astype(int)
    est = DPLogisticRegression(classes=[0, 1], data_norm=10.0)
    pipe = make_pipeline(StandardScaler(), est).fit(X, y)
    with pytest.raises(ModelFileError, match="StandardScaler"):
        dperm.save(pipe, tmp_path / "p.dperm")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("which", ["l1", "linf", "group", "chain-tv", "graph-tv"])
def test_a_norm_penalty_round_trips_as_plain_data(which, tmp_path):
    from dperm import norms

    X = _rows(4, 400, 4)
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    d = 4  # the features (the intercept is not penalized)
    norm = {
        "l1": norms.L1Norm(d, alpha=0.02),
        "linf": norms.LinfNorm(d, alpha=0.02),
        "group": norms.GroupLinfNorm([[0, 1], [1, 2], [3]], d, alpha=0.02),
        "chain-tv": norms.ChainTVNorm(d, mu=0.5, alpha=0.02),
        "graph-tv": norms.GraphTVNorm(
            [[0, 1], [1, 2], [2, 0], [0, 3]], d, mu=0.5, weights=[1.0, 2.0, 0.5, 1.5], alpha=0.02
        ),
    }[which]
    est = DPLogisticRegression(
        epsilon=2.0, mechanism="structured-output", penalty=norm, classes=[0, 1], random_state=0
    )
    est.fit(X, y)
    path = dperm.save(est, tmp_path / f"{which}.dperm")
    meta = read_metadata(path)
    assert meta["params"]["penalty"]["__dperm_norm__"] == type(norm).__name__
    loaded = dperm.load(path)
    assert type(loaded.penalty) is type(norm) and loaded.penalty.d == d
    assert loaded.penalty.alpha == norm.alpha
    if which == "group":
        np.testing.assert_array_equal(loaded.penalty.membership, norm.membership)
    if which == "graph-tv":
        np.testing.assert_array_equal(loaded.penalty.edges, norm.edges)
        np.testing.assert_array_equal(loaded.penalty.weights, norm.weights)
        assert loaded.penalty.mu == norm.mu
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    assert loaded.privacy_statement() == est.privacy_statement()


def test_a_norm_with_a_python_function_or_a_forged_norm_is_refused(tmp_path):
    from dperm import norms

    X = _rows(5, 300, 3)
    y = (X[:, 0] > 0).astype(int)
    sub = norms.SubmodularNorm(lambda m: float(np.count_nonzero(m)), 3, alpha=0.01)
    est = DPLogisticRegression(
        epsilon=2.0, mechanism="structured-output", penalty=sub, classes=[0, 1], random_state=0
    ).fit(X, y)
    with pytest.raises(ModelFileError, match="SubmodularNorm"):
        dperm.save(est, tmp_path / "sub.dperm")
    good = DPLogisticRegression(classes=[0, 1], random_state=0).fit(X, y)
    path = dperm.save(good, tmp_path / "good.dperm")
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(members["dperm.json"])
    meta["params"]["penalty"] = {"__dperm_norm__": "os.system", "d": 3}
    members["dperm.json"] = json.dumps(meta).encode()
    forged = tmp_path / "forged.dperm"
    with zipfile.ZipFile(forged, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    with pytest.raises(ModelFileError, match="allowed norm"):
        dperm.load(forged)
