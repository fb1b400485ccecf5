"""Data files as `datasets` reads them: the local formats (parquet, JSON/JSONL, CSV, arrow, a `save_to_disk`
folder) and hub dataset ids, for `convert lm-eval --data-files/--data-dir` (lm_eval_tasks.py) and
`convert dataset` (dataset_rows.py).

Pure: no pytest, no torch. `datasets` (an optional extra, pulled by `pytest-llmeval[lm-eval]`) is imported
only inside the functions that read data, so that naming a file costs nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmeval.models import _one_line  # an exception as one line, cut to 300 characters

__all__ = [
    "DATA_FORMATS",
    "DataFileError",
    "arrow_files",
    "data_format",
    "fingerprint",
    "load_hub",
    "load_split",
    "saved_splits",
    "split_files",
    "unreadable",
]

# A local file's format by its ending: the `datasets` builder that reads it.
DATA_FORMATS: dict[str, str] = {
    ".parquet": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".arrow": "arrow",
}
# What a DatasetDict's save_to_disk writes beside its split folders (and a Dataset's never does).
_DATASET_DICT = "dataset_dict.json"
INSTALL = "pip install 'pytest-llmeval[lm-eval]'"


class DataFileError(ValueError):
    """Data that cannot be read: `where` is the file, folder or hub id, `reason` one line saying why."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")


def arrow_files(folder: Path) -> list[Path]:
    """The .arrow files of a split `datasets`' save_to_disk wrote (its folder), in order."""
    return sorted(folder.glob("*.arrow"))


def split_files(path: Path) -> list[Path]:
    """The files a split reads: the file itself, or a save_to_disk folder's .arrow files."""
    return arrow_files(path) if path.is_dir() else [path]


def data_format(path: Path) -> str:
    """The `datasets` builder that reads one split (a file by its ending; a save_to_disk folder is arrow)."""
    return "arrow" if path.is_dir() else DATA_FORMATS[path.suffix]


def unreadable(path: Path) -> str | None:
    """Why `path` is not one split `datasets` can read (a missing path, a folder without .arrow files, a file
    of another format), or None when it is one."""
    if not path.exists():
        return f"{path} does not exist"
    if path.is_dir() and not arrow_files(path):
        return f"{path} is a folder without .arrow files (a split `save_to_disk` wrote)"
    if path.is_file() and path.suffix not in DATA_FORMATS:
        known = ", ".join(sorted(DATA_FORMATS))
        return f"cannot read a {path.suffix or 'nameless'} file ({known})"
    return None


def saved_splits(folder: Path) -> list[str] | None:
    """The split names of a DatasetDict save_to_disk wrote to `folder`, in its order; None when `folder` is
    not one."""
    index = folder / _DATASET_DICT
    if not index.is_file():
        return None
    try:
        splits = json.loads(index.read_text(encoding="utf-8")).get("splits")
    except (OSError, ValueError, AttributeError) as exc:
        raise DataFileError(str(index), f"not the index save_to_disk writes ({exc})") from None
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        raise DataFileError(str(index), "not the index save_to_disk writes (no list of 'splits')")
    return list(splits)


def fingerprint(files: Mapping[str, Path]) -> str:
    """sha256 over the data files' names and bytes: two runs on other data are never one series."""
    digest = hashlib.sha256()
    for split in sorted(files):
        digest.update(split.encode() + b"\0")
        for file in split_files(files[split]):
            digest.update(file.name.encode() + b"\0")
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def load_split(path: Path) -> Any:
    """One local split as a `datasets.Dataset`, read by the builder lm-eval's --data-files reads it with
    (data_format); DataFileError naming the path when it cannot be."""
    why = unreadable(path)
    if why is not None:
        raise DataFileError(str(path), why)
    datasets = _datasets(str(path), f"reading a {data_format(path)} file")
    try:
        return datasets.load_dataset(
            data_format(path), data_files=[str(f) for f in split_files(path)], split="train"
        )
    except Exception as exc:  # arrow's, pandas' and datasets' own errors alike: the data is at fault
        raise DataFileError(str(path), f"datasets cannot read it: {_one_line(exc)}") from None


def load_hub(name: str, subset: str | None, split: str | None) -> Any:
    """A hub dataset as `datasets.load_dataset` gives it (a Dataset, or a DatasetDict when no split is
    named), from its cache when HF_DATASETS_OFFLINE or HF_HUB_OFFLINE is set; DataFileError naming it when
    it cannot be had, in one line that says when it is offline mode that kept it out."""
    datasets = _datasets(name, "reading a hub dataset")
    try:
        return datasets.load_dataset(name, subset, split=split)
    except Exception as exc:
        # datasets reads both variables once, when it is imported; offline, a dataset that is not cached
        # is a ConnectionError (OfflineModeIsEnabled) raised before any request.
        if datasets.config.HF_DATASETS_OFFLINE:
            raise DataFileError(
                name,
                "not a local file or folder, and the hub dataset is not in the datasets cache while "
                "HF_DATASETS_OFFLINE (or HF_HUB_OFFLINE) is set: run once with network to cache it, or "
                "convert a local copy (parquet, JSON/JSONL, CSV, arrow, a save_to_disk folder)",
            ) from None
        raise DataFileError(name, f"cannot load the hub dataset: {_one_line(exc)}") from None


def _datasets(where: str, doing: str) -> Any:
    try:
        import datasets
    except ImportError:
        raise DataFileError(where, f"{doing} needs datasets: {INSTALL}") from None
    # One line says what was converted: datasets' progress bars and notes are not for the user here.
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets
