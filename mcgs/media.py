"""Tasks made of files: a table column that names one image per row.

An image task is a table task whose training and test tables share a column of file names
(``id`` = ``0004be2c.jpg`` in MLE-bench's aerial-cactus, ``image`` = ``cat_01.png`` in a plain
folder), with the files in a folder or a zip archive beside the tables. :func:`detect_media`
finds the column and, for each of the two tables, the *source* that holds its files; every file
of a row is then ``<source>/<prefix><value>`` (``prefix`` being the folder inside a Kaggle zip,
``train/``). Layouts understood:

* MLE-bench's: ``train.zip`` / ``test.zip`` (or ``train/`` / ``test/`` folders), files at the
  archive's root or under one folder;
* a plain folder: ``images/`` holding the files of both tables (values ``cat_01.png``), or values
  that are paths from the task folder (``images/cat_01.png``: the source is the task folder).

The engine reads the files only to check and describe them (:func:`check_media`,
:func:`describe_media`), with Pillow, members of a zip read in place (nothing is extracted).
Candidates read them from ``input/`` through the contract's ``media`` entry.
"""

from __future__ import annotations

import io
import random
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "IMAGE_SUFFIXES",
    "MediaError",
    "MediaSource",
    "MediaSpec",
    "MediaFiles",
    "is_image_name",
    "image_column",
    "is_file_source",
    "detect_media",
    "check_media",
    "describe_media",
    "commonest_size",
]

#: File name endings read as images (case-insensitive).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")
#: Values of a column looked at to decide whether it names image files, and to find their source.
SNIFF_VALUES = 50
#: Up to this many bytes of files in all, every image is decoded at load; above it, the headers of
#: all and the pixels of :data:`DECODE_SAMPLE` of them (a truncated file shows only when decoded).
DECODE_ALL_BYTES = 256 * 2**20
DECODE_SAMPLE = 2000
#: Images whose pixels the data profile summarises (per-channel mean and spread).
STATS_SAMPLE = 256


class MediaError(ValueError):
    """The files a task's table names are missing, unreadable or not found; the message names
    the files, the column and the folder, and says how to fix it."""


class MediaSource(BaseModel):
    """Where one table's files are.

    Attributes:
        path: A folder or ``.zip`` archive directly inside the task folder (``train.zip``,
            ``images``), or ``.`` for the task folder itself (values that are paths from it).
        prefix: Path inside the source before the column's value (``train/`` in Kaggle's zips).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str
    prefix: str = ""

    @property
    def is_zip(self) -> bool:
        return self.path.lower().endswith(".zip")

    @property
    def input_path(self) -> str:
        """Where the source is in a workspace: its copy under ``input/``."""
        return "input" if self.path == "." else f"input/{self.path}"


class MediaSpec(BaseModel):
    """The files of an image task.

    Attributes:
        kind: ``image`` (the only kind so far).
        column: The column of both tables that names each row's file.
        train, test: Where the training and the test rows' files are.
        n_bytes: Total size of the files, bytes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["image"] = "image"
    column: str
    train: MediaSource
    test: MediaSource
    n_bytes: int = 0

    def sources(self) -> list[str]:
        """The sources' entries of the task folder (for ``input/``), without repeats."""
        return list(dict.fromkeys(s.path for s in (self.train, self.test)))


class MediaFiles:
    """Reads the files of one source: ``open(value)`` gives the bytes of a row's file.

    Args:
        data_dir: The task folder.
        source: The source (folder, zip or the task folder).
    """

    def __init__(self, data_dir: Path, source: MediaSource):
        self.root = data_dir if source.path == "." else data_dir / source.path
        self.source = source
        self._zip = zipfile.ZipFile(self.root) if source.is_zip else None
        self._names = set(self._zip.namelist()) if self._zip else None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()

    def __enter__(self) -> "MediaFiles":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def exists(self, value: str) -> bool:
        """Whether the row's file is there."""
        name = self.source.prefix + value
        if self._zip is not None:
            return name in self._names
        path = self.root / name
        return path.is_file()

    def size(self, value: str) -> int:
        """The file's size, bytes."""
        name = self.source.prefix + value
        if self._zip is not None:
            return self._zip.getinfo(name).file_size
        return (self.root / name).stat().st_size

    def read(self, value: str) -> bytes:
        """The file's bytes."""
        name = self.source.prefix + value
        if self._zip is not None:
            return self._zip.read(name)
        return (self.root / name).read_bytes()


def is_image_name(v: Any) -> bool:
    """Whether a table value names an image file (ends with one of :data:`IMAGE_SUFFIXES`)."""
    return isinstance(v, str) and v.lower().endswith(IMAGE_SUFFIXES)


def image_column(train, test, declared: str | None) -> str | None:
    """The column of both tables whose first values all name image files, not URLs (the
    declared one if given), or None."""
    if declared is not None:
        return declared
    for c in train.columns:
        if c not in test.columns:
            continue
        head = [v for v in train[c].head(SNIFF_VALUES) if v == v]  # drop NaN
        if head and all(is_image_name(v) and "://" not in v for v in head):  # a URL is a table value
            return str(c)
    return None


def _safe_value(v: str) -> bool:
    """A value that stays inside its source: relative, no ``..``, no backslash tricks."""
    p = Path(v)
    return bool(v) and not p.is_absolute() and ".." not in p.parts and "\\" not in v


def is_file_source(path: Path) -> bool:
    """Whether an entry of a task folder may hold a task's files: a folder or a ``.zip`` archive,
    not hidden (a link the task's owner made, as ``mcgs run --prompt`` does, counts as its target)."""
    return not path.name.startswith(".") and (path.is_dir() or (path.is_file() and path.suffix.lower() == ".zip"))


def _candidate_sources(data_dir: Path, split: str, tables: Iterable[str]) -> list[Path]:
    """Folders and zips directly in the task folder, the ones named after the split first
    (``train``, ``train.zip``, ``train_images``), then the others, then the task folder."""
    skip = set(tables)
    entries = [p for p in sorted(data_dir.iterdir()) if p.name not in skip and is_file_source(p)]
    named = [p for p in entries if p.name.lower().startswith(split)]
    return named + [p for p in entries if p not in named] + [data_dir]


def _locate(data_dir: Path, entry: Path, values: list[str]) -> tuple[MediaSource | None, int]:
    """The source at ``entry`` with the prefix under which most of ``values`` are found, and how
    many are; ``(None, 0)`` when none is."""
    rel = "." if entry == data_dir else entry.name
    if rel == "." and not all("/" in v for v in values):
        return None, 0  # files loose beside the tables: only folders and archives are sources
    if entry.is_file():  # a zip: a prefix is what precedes a value in its member list
        try:
            with zipfile.ZipFile(entry) as z:
                names = set(z.namelist())
        except (zipfile.BadZipFile, OSError):
            return None, 0
        ends = tuple(values[:5])
        prefixes = {n[: -len(v)] for n in names for v in ends if n.endswith(v) and (n == v or n[-len(v) - 1] == "/")}
        hits = {p: sum(p + v in names for v in values) for p in prefixes}
    else:
        subs = [""] + ([d.name + "/" for d in sorted(entry.iterdir()) if d.is_dir() and not d.is_symlink()] if rel != "." else [])
        hits = {p: sum((entry / (p + v)).is_file() for v in values) for p in subs}
    if not hits or max(hits.values()) == 0:
        return None, 0
    best = max(sorted(hits, key=len), key=lambda p: hits[p])  # the shortest prefix of the most hits
    return MediaSource(path=rel, prefix=best), hits[best]


def _find_source(data_dir: Path, split: str, values: list[str], tables: Iterable[str], column: str, where: str) -> MediaSource:
    """The source holding most of the first :data:`SNIFF_VALUES` files (the first such, in
    :func:`_candidate_sources` order)."""
    sniff = values[:SNIFF_VALUES]
    best, best_hits = None, 0
    for entry in _candidate_sources(data_dir, split, tables):
        found, hits = _locate(data_dir, entry, sniff)
        if hits > best_hits:
            best, best_hits = found, hits
        if hits == len(sniff):
            break
    if best is not None:
        return best
    raise MediaError(
        f"{where}: column {column!r} of the {split} table names image files (e.g. {values[0]!r}) but no folder or zip "
        f"archive in {data_dir} holds them; put the files in a folder (images/, or {split}/) or a zip ({split}.zip) "
        f"beside the tables, named as in the column"
    )


def detect_media(data_dir: Path, train, test, *, declared: dict | None, tables: Iterable[str], where: str) -> MediaSpec | None:
    """Find a task's image column and the sources of its files.

    Args:
        data_dir: The task folder.
        train, test: The two tables (pandas frames).
        declared: task.yaml's ``files`` setting (``column``, ``train``, ``test``: source paths),
            any of them left out to be inferred; None: infer all.
        tables: The task's table file names (never sources).
        where: The file named in errors.

    Returns:
        The :class:`MediaSpec`, or None when no column names image files, or when the column was
        inferred and no folder or zip holds any of its training files (a table task whose column
        holds file names: the caller says so).

    Raises:
        MediaError: a declared column or source is missing, a value leaves its source (``..``),
            the test files are nowhere while the training files were found, or some rows' files
            are missing (counted, the first five named).
    """
    declared = dict(declared or {})
    column = image_column(train, test, declared.get("column"))
    if column is None:
        return None
    for frame, split in ((train, "training"), (test, "test")):
        if column not in frame.columns:
            raise MediaError(f"{where}: files.column {column!r} is not a column of the {split} table (columns: {list(frame.columns)})")
    sources: dict[str, MediaSource] = {}
    for frame, split in ((train, "train"), (test, "test")):
        values = frame[column]
        if values.isna().any():
            raise MediaError(f"{where}: column {column!r} of the {split} table has {int(values.isna().sum())} empty values; "
                             f"every row needs its file's name")
        values = values.astype(str).tolist()
        bad = [v for v in values if not _safe_value(v)]
        if bad:
            raise MediaError(f"{where}: column {column!r} of the {split} table names files outside the task folder "
                             f"(e.g. {bad[0]!r}); name each file relative to its folder, without '..' or a leading '/'")
        if declared.get(split):
            name = str(declared[split]).strip("/")
            entry = data_dir / name
            if "/" in name or name in ("", ".", "..") or not is_file_source(entry):
                raise MediaError(f"{where}: files.{split} {declared[split]!r} is not a folder or zip directly inside {data_dir}")
            found, _ = _locate(data_dir, entry, values[:SNIFF_VALUES])
            if found is None:
                raise MediaError(f"{where}: files.{split} {declared[split]!r} does not hold the files column {column!r} names "
                                 f"(e.g. {values[0]!r}); fix files.{split} or the file names")
            sources[split] = found
        else:
            try:
                sources[split] = _find_source(data_dir, split, values, tables, column, where)
            except MediaError:
                if declared.get("column") is None and not sources:
                    return None  # names that look like files, none of them here: a table column (the caller notes it)
                raise
        with MediaFiles(data_dir, sources[split]) as files:
            missing = [v for v in values if not files.exists(v)]
        if missing:
            src = sources[split]
            raise MediaError(f"{where}: {len(missing)} of the {len(values)} {split} rows name a file that {src.path}"
                             f"{'/' + src.prefix if src.prefix else ''} does not hold (e.g. {', '.join(map(repr, missing[:5]))}); "
                             f"add the files or drop those rows")
    return MediaSpec(column=column, train=sources["train"], test=sources["test"])


def commonest_size(media_profile: dict[str, Any] | None, default: tuple[int, int] = (32, 32)) -> tuple[int, int]:
    """``(width, height)`` of the commonest image size in a profile's ``media`` entry
    (:func:`describe_media`), or ``default`` without one."""
    sizes = (media_profile or {}).get("sizes") or {}
    if not sizes:
        return default
    w, h = next(iter(sizes)).split("x")
    return int(w), int(h)


def _open_image(data: bytes, decode: bool):
    from PIL import Image

    im = Image.open(io.BytesIO(data))
    if decode:
        im.load()
    return im


def check_media(data_dir: Path, media: MediaSpec, train_values: list[str], test_values: list[str], *, where: str, seed: int = 0) -> MediaSpec:
    """Open every file as an image, so a bad one is named before the search starts.

    Up to :data:`DECODE_ALL_BYTES` of files every image is decoded; above it, every header is
    read and :data:`DECODE_SAMPLE` images are decoded.

    Returns:
        ``media`` with ``n_bytes`` set.

    Raises:
        MediaError: naming the unreadable files (the first five, with Pillow's reason) and their
            count.
    """
    sizes: dict[str, list[int]] = {}
    for split, values in (("train", train_values), ("test", test_values)):
        with MediaFiles(data_dir, getattr(media, split)) as files:
            sizes[split] = [files.size(v) for v in values]
    total = sum(map(sum, sizes.values()))
    rng = random.Random(seed)
    bad: list[str] = []
    for split, values in (("train", train_values), ("test", test_values)):
        decode_all = total <= DECODE_ALL_BYTES
        decode = set(range(len(values))) if decode_all else set(rng.sample(range(len(values)), min(DECODE_SAMPLE, len(values))))
        with MediaFiles(data_dir, getattr(media, split)) as files:
            for i, v in enumerate(values):
                try:
                    _open_image(files.read(v), i in decode)
                except Exception as exc:  # Pillow raises several kinds for bad data
                    bad.append(f"{split} {v!r} ({type(exc).__name__}: {str(exc)[:80]})")
    if bad:
        raise MediaError(f"{where}: {len(bad)} image file(s) cannot be read: {'; '.join(bad[:5])}"
                         f"{' ...' if len(bad) > 5 else ''}; replace or remove them (and their rows)")
    return media.model_copy(update={"n_bytes": int(total)})


def describe_media(data_dir: Path, media: MediaSpec, train_values: list[str], test_values: list[str], seed: int = 0) -> dict[str, Any]:
    """The data profile's summary of an image task's files, from their headers and a sample.

    Returns:
        ``{"kind", "column", "n_train_files", "n_test_files", "n_bytes", "formats" {format: n},
        "modes" {mode: n}, "channels" (of the most common mode), "sizes" {"WxH": n} (the five most
        common), "min_size", "max_size" ([width, height]), "pixel_mean", "pixel_std" (per channel,
        0-255, over up to :data:`STATS_SAMPLE` images), "stats_images"}``.
    """
    import numpy as np

    formats: Counter = Counter()
    modes: Counter = Counter()
    sizes: Counter = Counter()
    rng = random.Random(seed)
    picked = {("train", i) for i in rng.sample(range(len(train_values)), min(STATS_SAMPLE, len(train_values)))}
    sums = None
    sq = None
    pixels = 0
    n_stats = 0
    for split, values in (("train", train_values), ("test", test_values)):
        with MediaFiles(data_dir, getattr(media, split)) as files:
            for i, v in enumerate(values):
                im = _open_image(files.read(v), decode=False)
                formats[str(im.format)] += 1
                modes[im.mode] += 1
                sizes[im.size] += 1
                if (split, i) in picked:
                    a = np.asarray(im.convert("RGB") if im.mode not in ("L", "RGB") else im, dtype=np.float64)
                    a = a.reshape(-1, 1 if a.ndim == 2 else a.shape[-1])
                    if sums is None or sums.shape[0] != a.shape[1]:
                        if sums is not None:
                            continue  # a sample mixing grey and colour images: keep the first kind
                        sums, sq = np.zeros(a.shape[1]), np.zeros(a.shape[1])
                    sums += a.sum(axis=0)
                    sq += (a**2).sum(axis=0)
                    pixels += a.shape[0]
                    n_stats += 1
    mean = sums / max(pixels, 1) if sums is not None else np.zeros(0)
    std = np.sqrt(np.maximum(sq / max(pixels, 1) - mean**2, 0)) if sums is not None else np.zeros(0)
    widths = [w for w, _ in sizes]
    heights = [h for _, h in sizes]
    top_mode = modes.most_common(1)[0][0] if modes else ""
    return {
        "kind": media.kind,
        "column": media.column,
        "n_train_files": len(train_values),
        "n_test_files": len(test_values),
        "n_bytes": media.n_bytes,
        "formats": dict(formats.most_common()),
        "modes": dict(modes.most_common()),
        "channels": {"1": 1, "L": 1, "P": 1, "RGB": 3, "RGBA": 4, "CMYK": 4, "I;16": 1}.get(top_mode, 3),
        "sizes": {f"{w}x{h}": n for (w, h), n in sizes.most_common(5)},
        "min_size": [min(widths), min(heights)] if sizes else [0, 0],
        "max_size": [max(widths), max(heights)] if sizes else [0, 0],
        "pixel_mean": [round(float(x), 2) for x in mean],
        "pixel_std": [round(float(x), 2) for x in std],
        "stats_images": n_stats,
    }
