"""Tasks made of files: image tasks in the plain and MLE-bench layouts, found, checked, profiled and
given to candidates through the contract (small PNGs made here), and aerial-cactus-identification
prepared and graded as MLE-bench does (real data)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from mcgs.contract import build_task_json, prepare_run_input, prepare_workspace
from mcgs.evaluation import TaskLabels, evaluate_workspace
from mcgs.profile import profile_task
from mcgs.task import TaskError, load_task

CACTUS = "aerial-cactus-identification"


def _png(value: int, size=(12, 10), mode="RGB") -> bytes:
    """A PNG of one colour: (value, 255 - value, 40) in RGB, value in grey."""
    colour = value if mode == "L" else (value, 255 - value, 40)
    buf = io.BytesIO()
    Image.new(mode, size, colour).save(buf, format="PNG")
    return buf.getvalue()


def _labelled(n: int, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Names, brightness and labels: a bright image is a positive (with 10 % of labels flipped)."""
    rng = np.random.default_rng(seed)
    value = rng.integers(0, 256, n)
    label = ((value > 128) ^ (rng.random(n) < 0.1)).astype(int)
    return [f"img_{i:04d}.png" for i in range(n)], value, label


def plain_image_task(folder: Path, n_train: int = 120, n_test: int = 40) -> Path:
    """images/ + CSV layout: train.csv (image, label), test.csv (image), one folder of files."""
    names, value, label = _labelled(n_train + n_test)
    (folder / "images").mkdir(parents=True)
    for name, v in zip(names, value):
        (folder / "images" / name).write_bytes(_png(int(v)))
    pd.DataFrame({"image": names[:n_train], "label": label[:n_train]}).to_csv(folder / "train.csv", index=False)
    pd.DataFrame({"image": names[n_train:]}).to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"image": names[n_train:], "label": 0.5}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text("metric: roc_auc\n")
    return folder


def mlebench_image_task(folder: Path, n_train: int = 120, n_test: int = 40, test_prefix: str = "test/") -> Path:
    """MLE-bench's layout: train.csv, sample_submission.csv, train.zip (files at the root) and
    test.zip (files under ``test_prefix``), no test table."""
    names, value, label = _labelled(n_train + n_test, seed=1)
    names = [n.replace(".png", ".jpg") for n in names]
    folder.mkdir(parents=True)
    for archive, prefix, rows in (("train.zip", "", range(n_train)), ("test.zip", test_prefix, range(n_train, n_train + n_test))):
        with zipfile.ZipFile(folder / archive, "w") as z:
            for i in rows:
                buf = io.BytesIO()
                Image.new("RGB", (16, 16), (int(value[i]),) * 3).save(buf, format="JPEG", quality=95)
                z.writestr(prefix + names[i], buf.getvalue())
    pd.DataFrame({"id": names[:n_train], "has_x": label[:n_train]}).to_csv(folder / "train.csv", index=False)
    pd.DataFrame({"id": names[n_train:], "has_x": 0.5}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text("metric: roc_auc\n")
    return folder


# --- finding the files -------------------------------------------------------------------------


def test_plain_layout_finds_the_image_column_and_folder(tmp_path):
    spec = load_task(plain_image_task(tmp_path / "t"))
    assert spec.media is not None and spec.media.column == "image"
    assert (spec.media.train.path, spec.media.train.prefix) == ("images", "")
    assert spec.media.test.path == "images"
    assert spec.extra_files == ["images"]
    assert spec.validation.kind == "holdout"  # one network per candidate
    assert spec.media.n_bytes == sum(p.stat().st_size for p in (tmp_path / "t" / "images").iterdir())


def test_mlebench_layout_reads_zips_with_and_without_a_folder_and_takes_test_ids_from_the_sample(tmp_path):
    spec = load_task(mlebench_image_task(tmp_path / "t"))
    assert spec.media.column == "id"
    assert (spec.media.train.path, spec.media.train.prefix) == ("train.zip", "")
    assert (spec.media.test.path, spec.media.test.prefix) == ("test.zip", "test/")
    assert spec.test_file == "sample_submission.csv" and spec.n_test == 40
    assert any("sample_submission.csv" in note for note in spec.notes)
    assert spec.target_columns == ["has_x"] and spec.task_kind == "binary"


def test_values_that_are_paths_from_the_task_folder(tmp_path):
    folder = plain_image_task(tmp_path / "t")
    for name in ("train.csv", "test.csv", "sample_submission.csv"):
        df = pd.read_csv(folder / name)
        df["image"] = "images/" + df["image"]
        df.to_csv(folder / name, index=False)
    spec = load_task(folder)
    assert spec.media.train.path == "." and spec.extra_files == ["images"]


def test_a_table_task_has_no_media(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    pd.DataFrame({"id": range(30), "x": range(30), "y": [0, 1] * 15}).to_csv(folder / "train.csv", index=False)
    pd.DataFrame({"id": range(30, 40), "x": range(10)}).to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"id": range(30, 40), "y": 0.5}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text("metric: roc_auc\n")
    spec = load_task(folder)
    assert spec.media is None and profile_task(spec)["modality"] == "table"
    assert build_task_json(spec).media is None


# --- bad files are named before the search starts ----------------------------------------------


def test_a_missing_file_is_named(tmp_path):
    folder = plain_image_task(tmp_path / "t")
    (folder / "images" / "img_0007.png").unlink()
    with pytest.raises(TaskError, match=r"1 of the 120 train rows name a file that images does not hold \(e.g. 'img_0007.png'\)"):
        load_task(folder)


def test_an_unreadable_image_is_named_with_the_reason(tmp_path):
    folder = plain_image_task(tmp_path / "t")
    good = (folder / "images" / "img_0130.png").read_bytes()
    (folder / "images" / "img_0130.png").write_bytes(good[: len(good) // 2])  # truncated
    (folder / "images" / "img_0003.png").write_bytes(b"not an image at all")
    with pytest.raises(TaskError) as err:
        load_task(folder)
    msg = str(err.value)
    assert "2 image file(s) cannot be read" in msg
    assert "train 'img_0003.png' (UnidentifiedImageError" in msg and "test 'img_0130.png'" in msg


def test_file_names_whose_files_are_nowhere_are_a_table_column_with_a_note(tmp_path):
    folder = plain_image_task(tmp_path / "t")
    (folder / "images").rename(folder / ".hidden")
    spec = load_task(folder)  # a column of logo file names in a table task is not an image task
    assert spec.media is None
    assert any("column 'image' names image files (e.g. 'img_0000.png') but no folder or zip" in n for n in spec.notes)
    for name in ("train.csv", "test.csv", "sample_submission.csv"):  # URLs are table values, never files
        df = pd.read_csv(folder / name)
        df["image"] = "https://example.org/" + df["image"]
        df.to_csv(folder / name, index=False)
    assert load_task(folder).media is None and not load_task(folder).notes
    data = mlebench_image_task(tmp_path / "m")
    (data / "test.zip").unlink()  # the training images are there: the test ones are missing
    with pytest.raises(TaskError, match="column 'id' of the test table names image files .* but no folder or zip archive"):
        load_task(data)
    (data / "train.zip").unlink()  # none at all, and no test table to read as one
    with pytest.raises(TaskError, match="no test table, and the images that sample_submission.csv's column 'id' names"):
        load_task(data)


def test_names_leaving_the_folder_are_refused(tmp_path):
    folder = plain_image_task(tmp_path / "t")
    df = pd.read_csv(folder / "train.csv")
    df.loc[3, "image"] = "../../etc/passwd.png"
    df.to_csv(folder / "train.csv", index=False)
    with pytest.raises(TaskError, match=r"names files outside the task folder \(e.g. '../../etc/passwd.png'\)"):
        load_task(folder)


def test_a_declared_source_that_does_not_hold_the_files(tmp_path):
    folder = plain_image_task(tmp_path / "t")
    (folder / "other").mkdir()
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "roc_auc", "files": {"train": "other"}}))
    with pytest.raises(TaskError, match=r"files.train 'other' does not hold the files column 'image' names"):
        load_task(folder)


# --- profile and contract -----------------------------------------------------------------------


def test_profile_describes_the_files(tmp_path):
    folder = plain_image_task(tmp_path / "t")
    (folder / "images" / "img_0001.png").write_bytes(_png(10, size=(30, 20), mode="L"))
    prof = profile_task(load_task(folder))
    media = prof["media"]
    assert prof["modality"] == "image" and prof["n_features"] == 0 and "image" not in prof["columns"]
    assert media["n_train_files"] == 120 and media["n_test_files"] == 40
    assert media["formats"] == {"PNG": 160} and media["modes"] == {"RGB": 159, "L": 1}
    assert media["channels"] == 3 and media["sizes"]["12x10"] == 159
    assert media["min_size"] == [12, 10] and media["max_size"] == [30, 20]
    # each image is one colour (v, 255 - v, 40): the channel means add up to 255 and the third is 40
    assert media["pixel_mean"][0] + media["pixel_mean"][1] == pytest.approx(255, abs=0.1)
    assert media["pixel_mean"][2] == pytest.approx(40) and media["pixel_std"][2] == pytest.approx(0)
    assert prof["class_shares"].keys() == {"0", "1"}


_BRIGHTNESS_PROGRAM = '''
import io, json, os, zipfile
import numpy as np, pandas as pd
from PIL import Image
task = json.load(open("input/task.json"))
m = task["media"]

def load(split, value):
    src = m[split]
    if src["archive"]:
        with zipfile.ZipFile(src["source"]) as z:
            data = z.read(src["prefix"] + value)
    else:
        data = open(os.path.join(src["source"], src["prefix"] + value), "rb").read()
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=float)[..., 0].mean() / 255

train = pd.read_csv(task["files"]["train"]["path"])
test = pd.read_csv(task["files"]["test"]["path"])
folds = pd.read_csv("input/folds.csv")
col, target = m["column"], task["target_columns"][0]
va = folds[folds.fold >= 0].row.to_numpy()
pd.DataFrame({"row": va, target: [load("train", v) for v in train[col].iloc[va]]}).to_csv("working/oof.csv", index=False)
p = [load("test", v) for v in test[col]]
pd.DataFrame({"row": range(len(test)), target: p}).to_csv("working/test_pred.csv", index=False)
pd.DataFrame({task["id_column"]: test[task["id_column"]], target: p}).to_csv("submission/submission.csv", index=False)
'''


@pytest.mark.parametrize("layout", ["plain", "mlebench"])
def test_a_candidate_reads_the_files_through_the_contract(tmp_path, layout):
    make = plain_image_task if layout == "plain" else mlebench_image_task
    spec = load_task(make(tmp_path / "t"))
    inp = prepare_run_input(spec, tmp_path / "run")
    tj = json.loads((inp / "task.json").read_text())
    assert tj["contract_version"] == "1.5"
    expected = {"plain": ("input/images", "", False), "mlebench": ("input/test.zip", "test/", True)}[layout]
    assert (tj["media"]["test"]["source"], tj["media"]["test"]["prefix"], tj["media"]["test"]["archive"]) == expected
    test_table = pd.read_csv(tmp_path / "run" / tj["files"]["test"]["path"])
    assert list(test_table.columns) == [spec.media.column] and len(test_table) == 40  # never the sample's 0.5 column
    ws = prepare_workspace(inp, tmp_path / "ws", _BRIGHTNESS_PROGRAM)
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    ev = evaluate_workspace(TaskLabels.load(spec, inp / "folds.csv"), ws)  # raises on an invalid output
    assert ev.test_pred.shape == (40, 1)
    # brightness decides the label but for the 10 % flipped: the AUC is far above chance
    assert 0.8 < ev.score < 1.0


# --- aerial-cactus-identification (MLE-bench lite), real data ------------------------------------


@pytest.fixture(scope="module")
def cactus(shared_data: Path, tmp_path_factory) -> Path:
    from mcgs.mlebench import prepare_competition

    return prepare_competition(CACTUS, shared_data / CACTUS / "raw", tmp_path_factory.mktemp("cactus"))


@pytest.mark.realdata
def test_cactus_prepared_csvs_match_mlebench_md5s_and_zips_hold_each_part(cactus: Path, shared_data: Path):
    published = yaml.safe_load((shared_data / CACTUS / "mlebench" / "checksums.yaml").read_text())
    for section in ("public", "private"):
        for name, md5 in published[section].items():
            assert hashlib.md5((cactus / "prepared" / section / name).read_bytes()).hexdigest() == md5, name
    public = cactus / "prepared" / "public"
    train, sample = pd.read_csv(public / "train.csv"), pd.read_csv(public / "sample_submission.csv")
    assert (len(train), len(sample)) == (14175, 3325)
    raw = zipfile.ZipFile(shared_data / CACTUS / "raw" / "train.zip")
    for archive, ids in (("train.zip", train["id"]), ("test.zip", sample["id"])):
        with zipfile.ZipFile(public / archive) as z:
            assert sorted(z.namelist()) == sorted(ids)  # at the root, one per row
            first = ids.iloc[0]
            assert z.read(first) == raw.read("train/" + first)  # image bytes unchanged
    assert not (public / "test.csv").exists()


@pytest.mark.realdata
def test_cactus_loads_as_an_image_task_and_grades(cactus: Path, tmp_path: Path):
    from mcgs.mlebench import grade_submission

    spec = load_task(cactus)
    assert spec.media.column == "id" and spec.task_kind == "binary" and spec.metric == "roc_auc"
    assert (spec.media.train.path, spec.media.test.path) == ("train.zip", "test.zip")
    media = profile_task(spec)["media"]
    assert media["sizes"] == {"32x32": 17500} and media["channels"] == 3
    answers = pd.read_csv(cactus / "prepared" / "private" / "test.csv")
    perfect = tmp_path / "perfect.csv"
    answers.assign(has_cactus=answers["has_cactus"].astype(float)).to_csv(perfect, index=False)
    report = grade_submission(CACTUS, perfect, cactus.parent)
    assert report.valid_submission and report.score == 1.0 and report.gold_medal
    sample = cactus / "prepared" / "public" / "sample_submission.csv"
    report = grade_submission(CACTUS, sample, cactus.parent)
    assert report.score == 0.5 and not report.any_medal


def test_a_request_that_does_not_name_the_modality_becomes_an_image_task(tmp_path):
    from mcgs.request import task_from_request

    data = mlebench_image_task(tmp_path / "data")
    (data / "task.yaml").unlink()
    spec, parsed = task_from_request("predict has_x for each test row; scored by ROC AUC", data, tmp_path / "task")
    assert spec.media is not None and spec.media.column == "id"
    assert spec.task_kind == "binary" and spec.metric == "roc_auc" and spec.n_test == 40
    assert any("no test table" in note for note in parsed.notes)
    assert sorted(p.name for p in (tmp_path / "task").iterdir() if p.is_symlink()) == ["sample_submission.csv", "test.zip", "train.csv", "train.zip"]


# --- recipes: table models on image features, networks on the pixels ----------------------------


def _run_config(spec, config: dict, folder: Path, time_limit_s: int | None = None):
    from recipe_runs import run_recipe

    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"} | ({"MCGS_TIME_LIMIT_S": str(time_limit_s)} if time_limit_s else {})
    return run_recipe(spec, config, folder, env=env)


def test_lightgbm_reads_the_images_through_their_features(tmp_path):
    from mcgs.coders.recipe_config import default_config

    spec = load_task(plain_image_task(tmp_path / "t", n_train=400, n_test=60))
    config = default_config("model.lightgbm", profile_task(spec))
    ev, out, ids = _run_config(spec, config, tmp_path)
    assert "223 image features from 460 images" in out and "data.image_features" in ids
    assert ev.score > 0.85  # brightness decides the label but for 10 % flipped labels


def test_a_cnn_learns_the_images_and_fits_its_epochs_to_the_time_it_has(tmp_path):
    pytest.importorskip("torch")
    from mcgs.coders.recipe_config import default_config

    spec = load_task(plain_image_task(tmp_path / "t", n_train=400, n_test=60))
    prof = profile_task(spec)
    config = default_config("model.image_cnn", prof)
    config["params"]["epochs"] = 6
    ev, out, ids = _run_config(spec, config, tmp_path / "a")
    assert "6.0 of 6 epochs" in out and {"data.image_augmentation", "data.test_time_augmentation", "model.image_cnn"} <= set(ids)
    assert ev.score > 0.8
    config["params"]["epochs"] = 100000  # far more than 5 s allows: the program cuts them
    _, out, _ = _run_config(spec, config, tmp_path / "b", time_limit_s=5)
    planned = float(out.split(" of 100000 epochs")[0].split()[-1])
    assert 0 < planned < 1000  # cut to the 5 s, of which reading the images and predicting take part


@pytest.mark.slow
def test_the_search_drafts_both_kinds_on_an_image_task(tmp_path):
    pytest.importorskip("torch")
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    spec = load_task(plain_image_task(tmp_path / "t", n_train=300, n_test=40))
    settings = SearchSettings(time_budget_s=600, max_nodes=2, seed=0, plan_candidates=0, ensemble=False, cpu_threads=1,
                              recipe_models=["model.lightgbm", "model.image_cnn"])
    search = create_search(spec, tmp_path / "run", settings=settings)
    search.run()
    drafts = [n for n in search.nodes() if n.config.get("model")]
    assert {"model.lightgbm", "model.image_cnn"} <= {n.config["model"] for n in drafts}  # the ResNet needs 500 rows
    assert all(n.is_valid for n in drafts), [(n.seq, n.error) for n in drafts if not n.is_valid]
    assert (tmp_path / "run" / "best" / "submission.csv").is_file()
    _exports_predict_new_images(search, drafts, tmp_path)


def _predict(folder: Path, *args: str) -> None:
    r = subprocess.run([sys.executable, "predict.py", *args], cwd=folder, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def _exports_predict_new_images(search, drafts, tmp_path: Path) -> None:
    """Each draft (image features + LightGBM, CNN) exported: predict.py reproduces the run's test
    predictions from the run's own files, predicts new images from a zip that holds them in a
    folder of its own, and the CNN's train.py refits on every training row."""
    from sklearn.metrics import roc_auc_score

    from mcgs.export import export_node

    new = tmp_path / "new"
    new.mkdir()
    names, value, label = _labelled(60, seed=7)
    names = [f"new_{n}" for n in names]
    with zipfile.ZipFile(new / "pics.zip", "w") as z:
        for name, v in zip(names, value):
            z.writestr(f"batch/{name}", _png(int(v)))
    pd.DataFrame({"image": names}).to_csv(new / "rows.csv", index=False)
    for node in drafts:
        res = export_node(search, tmp_path / f"model{node.seq}", node_seq=node.seq)
        folder = res.path
        assert res.measurements["ms_per_row"] > 0 and "--images" in (folder / "predict.py").read_text()
        assert "torch" in (folder / "requirements.txt").read_text() or node.config["model"] == "model.lightgbm"
        _predict(folder, "input/test.csv", "own.csv", "--raw", "--images", "input/images")
        run_pred = pd.read_csv(search.node_dir(node) / "working" / "test_pred.csv")
        np.testing.assert_allclose(pd.read_csv(folder / "own.csv")["label"], run_pred["label"], atol=1e-5)
        _predict(folder, str(new / "rows.csv"), "new.csv", "--images", str(new / "pics.zip"))
        sub = pd.read_csv(folder / "new.csv")
        assert list(sub.columns) == ["image", "label"] and sub["image"].tolist() == names
        assert roc_auc_score(label, sub["label"]) > 0.8, node.config["model"]
        if node.config["model"] == "model.image_cnn":
            r = subprocess.run([sys.executable, "train.py"], cwd=folder, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-3000:]
            _predict(folder, str(new / "rows.csv"), "refit.csv", "--images", str(new / "pics.zip"))
            refit = pd.read_csv(folder / "refit.csv")["label"]
            assert roc_auc_score(label, refit) > 0.8 and not np.allclose(refit, sub["label"])
    # an image missing from the folder named: the file and where it was looked for
    pd.DataFrame({"image": ["absent.png"]}).to_csv(new / "absent.csv", index=False)
    r = subprocess.run([sys.executable, "predict.py", str(new / "absent.csv"), "x.csv"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "absent.png" in r.stderr and str(new) in r.stderr


def test_the_llm_coder_is_told_the_modality_and_where_the_files_are(tmp_path):
    """Through the real Anthropic SDK against the local fake server: the stable prompt of an
    image task says it is one and where each table's files are, and the program the model
    writes (reading the zips in place) runs and is scored."""
    from fake_anthropic import FakeAnthropic, tool_reply
    from mcgs.coders.anthropic import AnthropicCoder
    from mcgs.coders.recipe import RecipeCoder
    from mcgs.llm import AnthropicClient
    from mcgs.search import create_search
    from mcgs.settings import LLMSettings, SearchSettings

    spec = load_task(mlebench_image_task(tmp_path / "t"))
    reply = lambda body: tool_reply({"plan": "brightness of the red channel", "code": _BRIGHTNESS_PROGRAM})  # noqa: E731
    with FakeAnthropic(default=reply) as fake:
        llm = LLMSettings(base_url=fake.base_url, max_retries=1, cheap_model="cheap", strong_model="strong", max_tokens=1000)
        settings = SearchSettings(time_budget_s=300, max_nodes=1, seed=0, ensemble=False, coder="anthropic", llm=llm, plan_candidates=0)
        coder = AnthropicCoder(settings, fallback=RecipeCoder(), client=AnthropicClient(settings.llm, api_key="test-key"))
        search = create_search(spec, tmp_path / "run", settings=settings, coder=coder)
        search.run()
    prefix = fake.requests[0]["system"][0]["text"]
    assert "# Files of this task (images)" in prefix and "column `id`" in prefix
    assert "training files in `input/train.zip`" in prefix and "test files in `input/test.zip` under `test/`" in prefix
    assert "Pillow, torch" in prefix and "MCGS_TIME_LIMIT_S" in prefix
    node = [n for n in search.nodes() if n.parent_id is not None][0]
    assert node.is_valid and 0.8 < node.score < 1.0, node.error


def _resnet18_state_dict():
    """A state_dict with torchvision's ResNet-18 names and shapes (random weights: a stand-in for
    resnet18-f37072fd.pth, which a test may not download)."""
    import torch

    sd, g = {}, torch.Generator().manual_seed(0)

    def conv(name, c_out, c_in, k):
        sd[f"{name}.weight"] = torch.randn(c_out, c_in, k, k, generator=g) * (2 / (c_in * k * k)) ** 0.5

    def bn(name, c):
        sd.update({f"{name}.weight": torch.ones(c), f"{name}.bias": torch.zeros(c), f"{name}.running_mean": torch.zeros(c),
                   f"{name}.running_var": torch.ones(c), f"{name}.num_batches_tracked": torch.tensor(0)})

    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    c_in = 64
    for i, c in enumerate((64, 128, 256, 512), start=1):
        for b in range(2):
            pre = f"layer{i}.{b}"
            conv(f"{pre}.conv1", c, c_in if b == 0 else c, 3)
            bn(f"{pre}.bn1", c)
            conv(f"{pre}.conv2", c, c, 3)
            bn(f"{pre}.bn2", c)
            if b == 0 and c != c_in:
                conv(f"{pre}.downsample.0", c, c_in, 1)
                bn(f"{pre}.downsample.1", c)
        c_in = c
    sd.update({"fc.weight": torch.zeros(1000, 512), "fc.bias": torch.zeros(1000)})
    return sd


def test_a_pretrained_backbone_is_drafted_first_only_when_its_weights_are_at_hand(tmp_path):
    torch = pytest.importorskip("torch")
    from mcgs.coders.recipe import RecipeCoder
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    spec = load_task(plain_image_task(tmp_path / "t", n_train=200, n_test=40))
    base = dict(time_budget_s=600, max_nodes=1, seed=0, plan_candidates=0, ensemble=False, cpu_threads=1)
    without = create_search(spec, tmp_path / "run0", settings=SearchSettings(**base), coder=RecipeCoder())
    assert "pretrained_weights" not in without.profile  # no weights: never drafted, never downloaded
    weights = tmp_path / "weights"
    weights.mkdir()
    torch.save(_resnet18_state_dict(), weights / "resnet18-f37072fd.pth")
    with pytest.raises(ValueError, match="weights_dir '.*nowhere' is not a folder"):
        SearchSettings(weights_dir=tmp_path / "nowhere")
    search = create_search(spec, tmp_path / "run", settings=SearchSettings(**base, weights_dir=weights),
                           coder=RecipeCoder(models=("model.image_pretrained_resnet",)))
    assert search.profile["pretrained_weights"] == ["resnet18"]
    assert (tmp_path / "run" / "input" / "weights" / "resnet18.pth").is_file()
    from mcgs.coders.recipe_config import default_config, render_program

    config = default_config("model.image_pretrained_resnet", search.profile) | {"seed": 0}
    config["params"].update(epochs=2, input_size=32)
    code, ids = render_program(config, title="t", plan="p", profile=search.profile)
    ws = prepare_workspace(search.input_dir, tmp_path / "ws", code)
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2.0 of 2 epochs" in r.stdout and "model.image_pretrained_resnet" in ids
    ev = evaluate_workspace(TaskLabels.load(spec, search.input_dir / "folds.csv"), ws)
    assert ev.test_pred.shape == (40, 1)
    (weights / "resnet18-f37072fd.pth").write_bytes(b"not a checkpoint")
    bad = create_search(spec, tmp_path / "run2", settings=SearchSettings(**base, weights_dir=weights), coder=RecipeCoder())
    ws = prepare_workspace(bad.input_dir, tmp_path / "ws2", code)
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode != 0  # a damaged file fails the node (Debug moves on), never a download
