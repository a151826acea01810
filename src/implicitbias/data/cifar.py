"""CIFAR-10 from the official *binary* archive, two classes (Frei et al. 2023, Fig. 2; S2).

CIFAR-10 cannot be downloaded here. The loader reads the binary version from a local path, either the
archive "cifar-10-binary.tar.gz" or its extracted folder "cifar-10-batches-bin" (data_batch_1.bin ..
data_batch_5.bin, test_batch.bin). Each record is 1 label byte followed by 3072 pixel bytes: the 32 x 32
red channel, then green, then blue, each row-major. Nothing is unpickled.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pydantic

from implicitbias._spec import ConfigError
from implicitbias.data.dataset import Dataset, DataSpec, streams

RECORD = 1 + 3072
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILE = "test_batch.bin"
FOLDER = "cifar-10-batches-bin"
ARCHIVE = "cifar-10-binary.tar.gz"
LABEL_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
WHERE = (
    "CIFAR-10 cannot be downloaded here: get the CIFAR-10 binary version (cifar-10-binary.tar.gz) from the "
    "authors' page https://www.cs.toronto.edu/~kriz/cifar.html, extracted or not, and pass its path "
    "(the .tar.gz, the cifar-10-batches-bin folder, or a folder containing either)"
)

Class = Annotated[int, pydantic.Field(ge=0, le=9)]


def _missing(path: Path, why: str) -> ConfigError:
    return ConfigError(f"Cifar10.path = '{path}' is not allowed: {why}. {WHERE}")


def _tar_members(archive: Path) -> dict[str, str]:
    """File name -> member name of the CIFAR-10 batches inside a tar archive."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            names = tar.getnames()
    except (tarfile.TarError, OSError) as exc:
        raise _missing(archive, f"it cannot be read as a tar archive ({exc})") from None
    members = {Path(m).name: m for m in names if Path(m).parent.name == FOLDER}
    lacking = [f for f in (*TRAIN_FILES, TEST_FILE) if f not in members]
    if lacking:
        raise _missing(archive, f"the archive lacks {FOLDER}/{', '.join(lacking)}")
    return members


def _records(raw: bytes, source: str) -> np.ndarray:
    if len(raw) % RECORD:
        raise ConfigError(
            f"Cifar10.path: {source} has {len(raw)} bytes, not a multiple of the {RECORD}-byte record "
            "(1 label byte + 3072 pixel bytes): expected an unmodified CIFAR-10 binary batch"
        )
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, RECORD)


class Cifar10(DataSpec):
    """Two CIFAR-10 classes (default airplane = 0 -> y = -1, automobile = 1 -> y = +1), read from `path`.

    n, n_test: optional random subsample sizes (from the seed) of the training and test images of the two
    classes. Pixels are scaled to [0, 1] and, if `centre`, the mean training image is subtracted from
    both sets. info: classes, label_names, mean (the subtracted mean image, zeros if not centred).
    A missing or incomplete path raises ConfigError naming the path and where to get the archive.
    """

    name: Literal["cifar10"] = "cifar10"
    path: str
    classes: tuple[Class, Class] = (0, 1)
    n: int | None = pydantic.Field(None, ge=1)
    n_test: int | None = pydantic.Field(None, ge=0)
    centre: bool = True

    @pydantic.model_validator(mode="after")
    def _distinct(self):
        if self.classes[0] == self.classes[1]:
            raise ValueError(f"classes = {self.classes}: expected two different CIFAR-10 classes")
        return self

    def locate(self) -> tuple[str, Path]:
        """("folder", the cifar-10-batches-bin folder) or ("archive", the tar file); raises ConfigError."""
        p = Path(self.path).expanduser()
        if p.is_file():
            _tar_members(p)
            return "archive", p
        if not p.is_dir():
            raise _missing(p, "no such file or folder")
        for folder in (p, p / FOLDER):
            if all((folder / f).is_file() for f in (*TRAIN_FILES, TEST_FILE)):
                return "folder", folder
        if (p / ARCHIVE).is_file():
            _tar_members(p / ARCHIVE)
            return "archive", p / ARCHIVE
        raise _missing(
            p, f"it holds neither {FOLDER}/ with {', '.join(TRAIN_FILES)} and {TEST_FILE} nor {ARCHIVE}"
        )

    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        kind, where = self.locate()
        if kind == "folder":
            raw = {f: (where / f).read_bytes() for f in (*TRAIN_FILES, TEST_FILE)}
        else:
            members = _tar_members(where)
            with tarfile.open(where, "r:*") as tar:
                raw = {f: tar.extractfile(members[f]).read() for f in (*TRAIN_FILES, TEST_FILE)}
        train = np.concatenate([self._two_classes(_records(raw[f], f)) for f in TRAIN_FILES])
        return train, self._two_classes(_records(raw[TEST_FILE], TEST_FILE))

    def _two_classes(self, records: np.ndarray) -> np.ndarray:
        return records[np.isin(records[:, 0], self.classes)]

    def _subsample(self, rng, records, size, field):
        if size is None:
            return records
        if size > len(records):
            raise ConfigError(
                f"Cifar10.{field} = {size} is not allowed: the archive has only {len(records)} images of "
                f"classes {self.classes} in that split (expected {field} <= {len(records)})"
            )
        return records[np.sort(rng.choice(len(records), size, replace=False))]

    def generate(self, seed: int) -> Dataset:
        r_train, r_test = streams(seed, 2)
        train, test = self._read()
        train = self._subsample(r_train, train, self.n, "n")
        test = self._subsample(r_test, test, self.n_test, "n_test")
        X, X_test = train[:, 1:] / 255.0, test[:, 1:] / 255.0
        mean = X.mean(axis=0) if self.centre and len(X) else np.zeros(X.shape[1])
        label = lambda r: np.where(r[:, 0] == self.classes[1], 1.0, -1.0)
        has_test = len(test) > 0
        info = {
            "classes": self.classes,
            "label_names": tuple(LABEL_NAMES[c] for c in self.classes),
            "mean": mean,
        }
        return Dataset(
            X - mean,
            label(train),
            X_test - mean if has_test else None,
            label(test) if has_test else None,
            "classification",
            info,
        ).validate()
