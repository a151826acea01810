"""Data generators, the Dataset checks and the near-orthogonality statistics."""

import io
import tarfile

import numpy as np
import pytest

from implicitbias._spec import ConfigError
from implicitbias.data import (
    Cifar10,
    Dataset,
    Digits,
    GaussianMixture,
    KnownSVM2D,
    MatrixCompletion,
    MatrixSensing,
    MulticlassSeparable,
    NearlyOrthogonal,
    NoisyXor,
    RazinCohen,
    Separable,
    SparseRegression,
    make_dataset,
    near_orthogonality,
)
from implicitbias.papers.boursier2022.data import Orthogonal
from implicitbias.papers.chistikov2023.data import TeacherNeuron, TwoTeachers
from implicitbias.papers.chistikov2023.families import ChistikovFamily
from implicitbias.papers.vardi2021.data import NeuronTeacher

# One small configuration of every generator that needs no file: the table every common check runs over.
SPECS = [
    NeuronTeacher(n=8, d=20, n_test=4),
    GaussianMixture(n=20, d=50, n_test=10, label_noise=0.1),
    NoisyXor(n=20, d=50, n_test=10),
    NearlyOrthogonal(n=5, d=40, n_test=3),
    Separable(n=30, d=3, n_test=5),
    Separable(n=30, d=3, method="condition", margin=0.5),
    KnownSVM2D(n=10),
    MulticlassSeparable(n=12, d=3, classes=3, margin=0.3, n_test=4),
    TeacherNeuron(d=8),
    TeacherNeuron(scheme="uncentred", d=8),
    TwoTeachers(d=6),
    Orthogonal(n=5, d=8, norm_min=0.5, norm_max=2.0),
    SparseRegression(n=10, d=30, k=3, n_test=4, noise_std=0.01),
    MatrixSensing(d=4, rank=1, n=10, n_test=3),
    MatrixCompletion(d=4, rank=1, n=8, n_test=3),
    Digits(classes=(3, 8), test_fraction=0.2),
    ChistikovFamily(family="m_negative", d=4),
    ChistikovFamily(family="m_positive", d=4),
]
IDS = [f"{s.name}-{i}" for i, s in enumerate(SPECS)]


def _arrays(ds: Dataset):
    return [a for a in (ds.X, ds.y, ds.X_test, ds.y_test) if a is not None]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_deterministic_and_valid(spec):
    a, b, c = spec.generate(3), spec.generate(3), spec.generate(4)
    for u, v in zip(_arrays(a), _arrays(b)):
        np.testing.assert_array_equal(u, v)
    # the Chistikov families are fixed constructions: only their test set is random
    assert any(not np.array_equal(u, w) for u, w in zip(_arrays(a), _arrays(c)))
    assert a.X.dtype == np.float64 and a.X.ndim == 2 and a.y.shape == (a.n,)
    if a.task == "classification":
        assert set(np.unique(a.y)) <= {-1.0, 1.0}
        if a.has_test:
            assert set(np.unique(a.y_test)) <= {-1.0, 1.0}
    if a.has_test:
        assert a.X_test.shape[1] == a.d and a.y_test.shape == (a.X_test.shape[0],)
    assert a.validate() is a
    assert make_dataset(spec.model_dump(), 3).X.shape == a.X.shape


def test_every_generator_is_in_the_table():
    from implicitbias import plugins

    builtin = {name for name, package in plugins.origins("data").items() if package == "implicitbias"}
    assert {s.name for s in SPECS} | {"razin_cohen", "cifar10", "arrays"} == builtin


def test_shapes():
    assert GaussianMixture(n=7, d=9, n_test=5).generate(0).X_test.shape == (5, 9)
    assert GaussianMixture(n=7, d=9, n_test=0).generate(0).X_test is None
    assert MatrixSensing(d=3, n=5).generate(0).X.shape == (5, 9)
    assert TwoTeachers(d=5, n_per_teacher=3).generate(0).X.shape == (6, 5)


def test_changing_the_test_size_keeps_the_training_set():
    a, b = GaussianMixture(n=5, d=7, n_test=3).generate(1), GaussianMixture(n=5, d=7, n_test=30).generate(1)
    np.testing.assert_array_equal(a.X, b.X)


def test_gmm_mean_norm_and_noise():
    ds = GaussianMixture(n=2000, d=100, n_test=0, label_noise=0.2).generate(0)
    assert np.linalg.norm(ds.info["mu"]) == pytest.approx(100**0.26)
    assert 0.15 < ds.info["flipped"].size / 2000 < 0.25
    axis = GaussianMixture(n=3, d=10, mean_norm=2.0, direction="axis").generate(0).info["mu"]
    np.testing.assert_allclose(axis, 2.0 * np.eye(10)[0])


def test_xor_defeats_every_linear_classifier():
    from sklearn.linear_model import LogisticRegression

    ds = NoisyXor(n=2000, d=20, mean_norm=3.0, n_test=20000).generate(0)
    assert abs(ds.info["mu1"] @ ds.info["mu2"]) < 1e-12
    assert 0.4 < np.mean(ds.y > 0) < 0.6
    clf = LogisticRegression(fit_intercept=False).fit(ds.X, ds.y)
    assert abs(clf.score(ds.X_test, ds.y_test) - 0.5) < 0.03


@pytest.mark.parametrize("scheme", ["centred", "uncentred"])
def test_teacher_neuron(scheme):
    ds = TeacherNeuron(scheme=scheme, d=16).generate(0)
    v = ds.info["v_star"]
    assert np.linalg.norm(v) == pytest.approx(1.0)
    assert ds.X.shape == (16, 16) and ds.X_test.shape == (64, 16) and ds.task == "regression"
    assert np.all(ds.X @ v > 0)  # every angle < pi/2
    np.testing.assert_allclose(ds.y, np.maximum(ds.X @ v, 0.0))
    np.testing.assert_allclose(ds.y_test, np.maximum(ds.X_test @ v, 0.0))
    cosines = ds.X @ v / np.linalg.norm(ds.X, axis=1)
    assert abs(np.median(np.arccos(cosines)) - np.pi / 4) < 0.25
    if scheme == "uncentred":
        np.testing.assert_allclose(v, ds.info["x0"] / np.linalg.norm(ds.info["x0"]))
        assert ds.info["rho"] == pytest.approx(np.sqrt(2) - 1)
        with_x0 = TeacherNeuron(scheme=scheme, d=16, include_x0=True).generate(0)
        assert with_x0.n == 17


def test_teacher_neuron_redraws_are_counted():
    # d = 1 with a large rho: the single point often lands on the wrong side and is redrawn.
    redraws = [TeacherNeuron(d=1, rho=4.0).generate(s).info["redraws"] for s in range(20)]
    assert max(redraws) > 0
    # With max_redraws = 0 about half of these seeds need a redraw, which is refused.
    refused = 0
    for seed in range(10):
        try:
            TeacherNeuron(d=1, rho=100.0, max_redraws=0).generate(seed)
        except ConfigError as exc:
            assert "max_redraws = 0" in str(exc)
            refused += 1
    assert 0 < refused < 10


def test_two_teachers():
    ds = TwoTeachers(d=16).generate(0)
    V = ds.info["teachers"]
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), [1.0, 3.0])
    np.testing.assert_allclose(V[1], -3.0 * V[0])
    assert ds.n == 32
    np.testing.assert_allclose(ds.y, np.maximum(ds.X @ V.T, 0.0).sum(axis=1))
    own = np.sum(ds.X * V[ds.info["cluster"]], axis=1)
    assert np.all(own > 0)


def test_orthogonal_gram_is_diagonal():
    ds = Orthogonal(n=6, d=9, norm_min=0.5, norm_max=2.0).generate(0)
    G = ds.X @ ds.X.T
    assert np.max(np.abs(G - np.diag(np.diag(G)))) < 1e-12
    assert np.all((np.sqrt(np.diag(G)) >= 0.5 - 1e-12) & (np.sqrt(np.diag(G)) <= 2.0 + 1e-12))
    assert np.sum(ds.y < 0) == 3 and np.all(np.abs(ds.y) >= 0.5)
    with pytest.raises(ConfigError, match="d >= n"):
        Orthogonal(n=5, d=4)


def test_sparse_regression_and_separable():
    ds = SparseRegression(n=10, d=30, k=3).generate(0)
    w = ds.info["w_star"]
    assert np.count_nonzero(w) == 3 and np.linalg.norm(w) == pytest.approx(1.0)
    np.testing.assert_allclose(ds.y, ds.X @ w)
    for method in ("shift", "condition"):
        sep = Separable(n=200, d=4, margin=0.3, method=method).generate(0)
        q = sep.y * (sep.X @ sep.info["w_star"])
        assert q.min() >= 0.3 - 1e-12 and sep.info["margin"] == pytest.approx(q.min())


def test_matrix_data():
    ds = MatrixSensing(d=5, rank=2, n=12).generate(0)
    W = ds.info["W_star"]
    assert np.linalg.matrix_rank(W) == 2 and np.linalg.norm(W) == pytest.approx(np.sqrt(5))
    np.testing.assert_allclose(ds.y, [np.sum(x.reshape(5, 5) * W) for x in ds.X])
    mc = MatrixCompletion(d=5, rank=1, n=10, n_test=5).generate(0)
    p, q = mc.info["observed"].T
    np.testing.assert_allclose(mc.y, mc.info["W_star"][p, q])
    assert len({(a, b) for a, b in zip(p, q)}) == 10 and mc.info["mask"].sum() == 10
    assert np.all(mc.X_test @ mc.info["mask"].reshape(-1) == 0)  # test entries are unobserved
    rc = RazinCohen().generate(0)
    np.testing.assert_array_equal(rc.X, [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    np.testing.assert_array_equal(rc.y, [1, 1, 0])


def test_digits():
    ds = Digits(classes=(0, 1), test_fraction=0.25).generate(0)
    assert ds.d == 64 and ds.n + ds.X_test.shape[0] == 360
    assert set(ds.info["digits"]) == {0, 1}
    np.testing.assert_allclose(ds.y, np.where(ds.info["digits"] == 1, 1.0, -1.0))
    np.testing.assert_allclose(ds.X.mean(axis=0), 0.0, atol=1e-12)
    unit = Digits(classes="odd_even", features="unit_norm", n=100).generate(0)
    assert unit.n == 100 and np.allclose(np.linalg.norm(unit.X, axis=1), 1.0)
    with pytest.raises(ConfigError, match="different"):
        Digits(classes=(2, 2))


def test_frei_and_kou_conditions():
    big = NearlyOrthogonal(n=10, d=50_000).generate(0)
    s = near_orthogonality(big.X, gamma=1.0, C_kou=2.0)
    assert s.frei_holds and s.frei_lhs >= s.frei_rhs and s.frei_gamma_min <= 1.0
    assert s.kou_holds and s.kou_C_max >= 2.0
    assert any("holds" in line for line in s.lines())
    small = near_orthogonality(NearlyOrthogonal(n=10, d=50).generate(0).X, gamma=1.0, C_kou=2.0)
    assert not small.frei_holds and not small.kou_holds and small.frei_gamma_min > 1.0
    X = np.array([[2.0, 0.0], [1.0, 1.0]])  # ||x||^2 = 4, 2; <x_1, x_2> = 2
    t = near_orthogonality(X, gamma=0.5)
    assert t.max_inner == 2.0 and t.R == pytest.approx(np.sqrt(2))
    assert t.frei_rhs == pytest.approx(3 * 8 * 2 * 2 * 2) and t.kou_C_max == pytest.approx(0.5)
    assert near_orthogonality(X[:1], gamma=1.0).frei_holds
    with pytest.raises(ConfigError, match="gamma"):
        near_orthogonality(X, gamma=0.0)


def test_validate_names_the_field():
    X, y = np.ones((4, 6)), np.array([1.0, -1.0, 1.0, -1.0])
    bad = X.copy()
    bad[2, 5] = np.nan
    bad[3, 0] = np.inf
    with pytest.raises(
        ConfigError, match=r"data\.X contains 2 non-finite entries \(first at row 2, column 5\)"
    ):
        Dataset(bad, y).validate()
    with pytest.raises(ConfigError, match=r"data\.y .*0\.5"):
        Dataset(X, np.array([1.0, 0.5, 1.0, -1.0])).validate()
    Dataset(X, np.array([1.0, 0.5, 1.0, -1.0]), task="regression").validate()
    with pytest.raises(ConfigError, match=r"data\.X has 4 rows but data\.y has 3"):
        Dataset(X, y[:3]).validate()
    with pytest.raises(ConfigError, match="at least one point"):
        Dataset(np.ones((0, 6)), np.ones(0)).validate()
    with pytest.raises(ConfigError, match=r"data\.y_test"):
        Dataset(X, y, X, np.array([1.0, 2.0, 1.0, 1.0])).validate()
    with pytest.raises(ConfigError, match="seed"):
        GaussianMixture(n=2, d=2).generate(-1)


def test_spec_errors():
    with pytest.raises(ConfigError, match="GaussianMixture.n = 0"):
        GaussianMixture(n=0)
    with pytest.raises(ConfigError, match="label_noise"):
        GaussianMixture(label_noise=0.5)
    with pytest.raises(ConfigError, match="data.name = 'nope'"):
        make_dataset({"name": "nope"}, 0)


# -- CIFAR-10: a tiny fake archive in the official binary format --------------------------------------


def _fake_cifar(root, per_file=6):
    """Write cifar-10-batches-bin/ with a few records per batch and return {file: records}."""
    rng = np.random.default_rng(0)
    folder = root / "cifar-10-batches-bin"
    folder.mkdir()
    out = {}
    for f in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        rec = np.concatenate(
            [
                np.arange(per_file, dtype=np.uint8)[:, None] % 3,
                rng.integers(0, 256, (per_file, 3072), np.uint8),
            ],
            axis=1,
        )
        (folder / f).write_bytes(rec.tobytes())
        out[f] = rec
    return folder, out


def _check_fake(ds, records):
    train = np.concatenate([records[f"data_batch_{i}.bin"] for i in range(1, 6)])
    train = train[train[:, 0] < 2]
    test = records["test_batch.bin"][records["test_batch.bin"][:, 0] < 2]
    assert ds.X.shape == (len(train), 3072) and ds.X_test.shape == (len(test), 3072)
    np.testing.assert_allclose(ds.y, np.where(train[:, 0] == 1, 1.0, -1.0))
    mean = train[:, 1:].mean(axis=0) / 255
    np.testing.assert_allclose(ds.X, train[:, 1:] / 255 - mean, atol=1e-12)
    np.testing.assert_allclose(ds.X_test, test[:, 1:] / 255 - mean, atol=1e-12)


def test_cifar_extracted_and_archive(tmp_path):
    folder, records = _fake_cifar(tmp_path)
    for path in (folder, tmp_path):
        _check_fake(Cifar10(path=str(path)).generate(0), records)
    archive = tmp_path / "arch" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="cifar-10-batches-bin")
    for path in (archive, archive.parent):
        _check_fake(Cifar10(path=str(path)).generate(0), records)
    sub = Cifar10(path=str(archive), n=5, n_test=2, classes=(1, 2)).generate(0)
    assert sub.n == 5 and sub.X_test.shape == (2, 3072)


def test_cifar_missing_or_broken(tmp_path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(ConfigError, match=f"Cifar10.path = '{missing}'.*binary version"):
        Cifar10(path=str(missing)).generate(0)
    with pytest.raises(ConfigError, match="neither"):
        Cifar10(path=str(tmp_path)).generate(0)
    folder, _ = _fake_cifar(tmp_path)
    (folder / "test_batch.bin").unlink()
    with pytest.raises(ConfigError, match="neither"):
        Cifar10(path=str(folder)).generate(0)
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-bin/data_batch_1.bin")
        info.size = 3073
        tar.addfile(info, io.BytesIO(bytes(3073)))
    with pytest.raises(ConfigError, match="lacks"):
        Cifar10(path=str(bad)).generate(0)
    (tmp_path / "ok").mkdir()
    good, _ = _fake_cifar(tmp_path / "ok")
    with pytest.raises(ConfigError, match="Cifar10.n = 10000"):
        Cifar10(path=str(good), n=10_000).generate(0)


# -- a researcher's own arrays ----------------------------------------------------------------------------------


def test_arrays_from_a_file_and_from_memory_give_the_same_data_and_identity(tmp_path, monkeypatch):
    from implicitbias.data import Arrays

    monkeypatch.setenv("IMPLICITBIAS_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(6, 4)), np.array([1.0, -1, 1, -1, 1, -1])
    np.savez(tmp_path / "mine.npz", X=X, y=y)
    spec = Arrays(path=str(tmp_path / "mine.npz"))
    data = spec.generate(0)
    np.testing.assert_array_equal(data.X, X)
    np.testing.assert_array_equal(spec.generate(7).y, y)  # fixed data: every seed gives the same arrays
    again = Arrays.of(X, y)  # a notebook's arrays, written once to a content-addressed file
    np.testing.assert_array_equal(again.generate(0).X, X)
    assert Arrays.of(X, y).path == again.path and len(spec.sha256) == 64
    assert make_dataset(spec.model_dump(), 0).n == 6  # through a config dict, as a run's data


def test_arrays_refuse_a_missing_file_a_changed_file_and_missing_variables(tmp_path):
    from implicitbias.data import Arrays

    with pytest.raises(ConfigError, match="no such file"):
        Arrays(path=str(tmp_path / "none.npz"))
    np.savez(tmp_path / "d.npz", X=np.eye(2), y=np.array([1.0, -1.0]))
    spec = Arrays(path=str(tmp_path / "d.npz"))
    np.savez(tmp_path / "d.npz", X=2 * np.eye(2), y=np.array([1.0, -1.0]))
    with pytest.raises(ConfigError, match="content changed"):
        spec.generate(0)
    np.savez(tmp_path / "e.npz", X=np.eye(2))
    with pytest.raises(ConfigError, match="has no y"):
        Arrays(path=str(tmp_path / "e.npz")).generate(0)
    np.savez(tmp_path / "f.npz", X=np.eye(2), y=np.array([1.0, 0.0]))
    with pytest.raises(ConfigError, match="labels outside"):
        Arrays(path=str(tmp_path / "f.npz")).generate(0)


def test_arrays_read_netcdf_and_train_as_a_run(tmp_path):
    import xarray as xr

    from implicitbias.data import Arrays
    from implicitbias.losses import Loss
    from implicitbias.models import Linear
    from implicitbias.runs.execute import train_group
    from implicitbias.runs.spec import RunSpec
    from implicitbias.training.methods import GD
    from implicitbias.training.stopping import Stop

    X, y = np.array([[1.0, 0.2], [-0.8, 0.1], [0.9, -0.3]]), np.array([1.0, -1.0, 1.0])
    xr.Dataset({"X": (("n", "d"), X), "y": (("n",), y)}).to_netcdf(tmp_path / "d.nc")
    spec = RunSpec(model=Linear(), data=Arrays(path=str(tmp_path / "d.nc")), loss=Loss(name="logistic"),
                   method=GD(lr=0.5), stop=Stop(max_steps=50), checkpoints=5)
    (ds,) = train_group([spec])
    assert ds["loss"].values[0, -1] < ds["loss"].values[0, 0]
    assert RunSpec.from_json(spec.to_json()).key() == spec.key()


def test_an_experiment_sweeps_over_data_files(tmp_path):
    """A grid over data.path: each file's own hash enters its runs (none carried over from the base path)."""
    from implicitbias.data import Arrays
    from implicitbias.experiments.config import ExperimentConfig, expand
    from implicitbias.losses import Loss
    from implicitbias.models import Linear
    from implicitbias.training.methods import GD

    for i, name in enumerate(("a.npz", "b.npz")):
        np.savez(tmp_path / name, X=np.eye(3) * (i + 1), y=np.array([1.0, -1.0, 1.0]))
    config = ExperimentConfig(model=Linear(), data=Arrays(path=str(tmp_path / "a.npz")), loss=Loss(name="logistic"),
                              method=GD(lr=0.1), grid={"data.path": [str(tmp_path / "a.npz"), str(tmp_path / "b.npz")]})
    runs = expand(config)
    assert [r.data.sha256 for r in runs] == [Arrays(path=str(tmp_path / n)).sha256 for n in ("a.npz", "b.npz")]
    assert runs[1].data.generate(0).X[0, 0] == 2.0 and runs[0].data_key() != runs[1].data_key()
