"""bert_tf.fileio: atomic writes and reads on local disk, ram:// and (faked) object stores."""

import os
from pathlib import Path
import stat
import uuid

import pytest
import tensorflow as tf

from bert_tf import fileio


@pytest.fixture
def ram_dir():
    path = f"ram://fileio_{uuid.uuid4().hex[:8]}"
    tf.io.gfile.makedirs(path)
    return path


def test_local_atomic_write_fsyncs_before_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace",
                        lambda a, b: (events.append(("replace", os.path.basename(b))),
                                      real_replace(a, b))[1])
    path = tmp_path / "results.json"
    path.write_text("old")
    fileio.write_text_atomic(str(path), "{\"step\": 7}\n")
    assert events == ["fsync", ("replace", "results.json")]
    assert path.read_text() == "{\"step\": 7}\n"
    assert os.listdir(tmp_path) == ["results.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask


def test_local_failed_write_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n")

    def fail(a, b):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space left"):
        fileio.write_bytes_atomic(str(path), b"[PAD]\n[UNK]\n")
    assert path.read_text() == "[PAD]\n"
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_ram_atomic_write_renames_a_temp_into_place(ram_dir, monkeypatch):
    fsyncs, renames = [], []
    monkeypatch.setattr(os, "fsync", fsyncs.append)
    real_rename = tf.io.gfile.rename
    monkeypatch.setattr(tf.io.gfile, "rename", lambda a, b, overwrite=False: (
        renames.append((a.rsplit("/", 1)[1], b, overwrite)), real_rename(a, b, overwrite))[1])
    path = f"{ram_dir}/results.json"
    fileio.write_text_atomic(path, "first\n")
    fileio.write_text_atomic(path, "second: é\n")
    with tf.io.gfile.GFile(path, "rb") as f:
        assert f.read() == "second: é\n".encode("utf-8")
    assert tf.io.gfile.listdir(ram_dir) == ["results.json"]
    assert [(b, overwrite) for _, b, overwrite in renames] == [(path, True)] * 2
    assert all(a.startswith(".tmp_") and a.endswith("_results.json") for a, _, _ in renames)
    assert fsyncs == []  # no local file descriptor: the file system's own rename is the commit


def test_ram_failed_rename_keeps_the_old_content_and_no_temp(ram_dir, monkeypatch):
    path = f"{ram_dir}/bert_config.json"
    fileio.write_text_atomic(path, "old")

    def fail(a, b, overwrite=False):
        raise tf.errors.UnavailableError(None, None, "connection reset")
    monkeypatch.setattr(tf.io.gfile, "rename", fail)
    with pytest.raises(tf.errors.UnavailableError):
        fileio.write_text_atomic(path, "new")
    with tf.io.gfile.GFile(path) as f:
        assert f.read() == "old"
    assert tf.io.gfile.listdir(ram_dir) == ["bert_config.json"]


class _RecordingGFile:
    """Stands in for tf.io.gfile on an object store: records opens, copies and renames."""

    def __init__(self):
        self.calls = []
        self.files = {}

    def GFile(self, path, mode):  # noqa: N802  (tf.io.gfile's name)
        calls, files = self.calls, self.files

        class Handle:
            def __enter__(self):
                calls.append(("open", path, mode))
                return self

            def write(self, data):
                files[path] = data

            def __exit__(self, *exc):
                return False
        return Handle()

    def copy(self, source, target, overwrite=False):
        self.calls.append(("copy", source, target))

    def rename(self, source, target, overwrite=False):
        self.calls.append(("rename", source, target))


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_object_store_writes_the_final_object_in_one_upload(scheme, monkeypatch, tmp_path):
    fake = _RecordingGFile()
    monkeypatch.setattr(fileio, "gfile", lambda: fake)
    path = f"{scheme}://bucket/run/results.json"
    fileio.write_text_atomic(path, "{}\n")
    # A rename there is copy + delete: the upload itself is atomic, so no temporary object.
    assert fake.calls == [("open", path, "wb")] and fake.files == {path: b"{}\n"}
    local = tmp_path / "model.keras"
    local.write_bytes(b"zip")
    fileio.publish_file(str(local), f"{scheme}://bucket/run/model.keras")
    assert fake.calls[1:] == [("copy", str(local), f"{scheme}://bucket/run/model.keras")]
    assert not local.exists()


def test_upload_to_ram_lands_whole(ram_dir, tmp_path):
    local = tmp_path / "encoder.keras"
    local.write_bytes(b"\x00zip" * 1000)
    fileio.publish_file(str(local), f"{ram_dir}/encoder.keras")
    with tf.io.gfile.GFile(f"{ram_dir}/encoder.keras", "rb") as f:
        assert f.read() == b"\x00zip" * 1000
    assert tf.io.gfile.listdir(ram_dir) == ["encoder.keras"] and not local.exists()


def test_open_file_reads_ram_like_open_reads_local(ram_dir, tmp_path):
    data = "a,\"b\r\nc\"\r\né\n".encode("utf-8")
    (tmp_path / "x.csv").write_bytes(data)
    fileio.write_bytes_atomic(f"{ram_dir}/x.csv", data)
    for path in (str(tmp_path / "x.csv"), f"{ram_dir}/x.csv"):
        with fileio.open_file(path, encoding="utf-8", newline="") as f:
            assert f.read() == "a,\"b\r\nc\"\r\né\n"
        with fileio.open_file(path, encoding="utf-8") as f:
            assert list(f) == ["a,\"b\n", "c\"\n", "é\n"]
        with fileio.open_file(path, "rb") as f:
            assert f.read() == data
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        fileio.open_file(f"{ram_dir}/missing.txt")
    with pytest.raises(ValueError, match="reads only"):
        fileio.open_file(f"{ram_dir}/x.csv", "w")


def test_isdir_on_ram_is_not_fooled_by_a_checkpoint_prefix(ram_dir):
    for name in ("ckpt-6.index", "ckpt-6.data-00000-of-00001", "best/metrics.json"):
        fileio.write_text_atomic(f"{ram_dir}/{name}", "x")
    # ram:// itself says every prefix of a file name is a directory.
    assert tf.io.gfile.isdir(f"{ram_dir}/ckpt-6")
    assert not fileio.isdir(f"{ram_dir}/ckpt-6")
    assert fileio.isdir(f"{ram_dir}/best") and fileio.isdir(ram_dir)
    assert fileio.isfile(f"{ram_dir}/ckpt-6.index") and not fileio.isfile(f"{ram_dir}/best")


# --- Publishing against a concurrent writer ---------------------------------------------------

def test_a_file_output_never_replaces_a_file_that_appeared_or_changed(tmp_path):
    """The final move of a file output compares the target with its state at the check: a file
    another writer made (or changed) meanwhile stays byte for byte, the error names it, and no
    temporary is left."""
    path = tmp_path / "vectors.jsonl"
    expected = fileio.state(str(path))
    assert expected is None
    path.write_text("the other writer's\n")
    with pytest.raises(fileio.TargetChangedError) as raised:
        fileio.write_text_atomic(str(path), "mine\n", expected)
    assert str(raised.value) == (
        f"{path} appeared or changed after this command checked it (another command writing "
        "there?); nothing there was replaced: rerun once it is free, or choose another output")
    assert path.read_text() == "the other writer's\n"
    assert os.listdir(tmp_path) == ["vectors.jsonl"]
    # An existing file, checked, then changed: refused too; unchanged: replaced.
    expected = fileio.state(str(path))
    os.utime(path, ns=(1, 1))
    with pytest.raises(fileio.TargetChangedError):
        fileio.write_text_atomic(str(path), "mine\n", expected)
    fileio.write_text_atomic(str(path), "mine\n", fileio.state(str(path)))
    assert path.read_text() == "mine\n"
    # Nothing there and nothing appeared: published (a hard link, then the temporary goes).
    fresh = tmp_path / "fresh.txt"
    fileio.write_text_atomic(str(fresh), "new\n", fileio.state(str(fresh)))
    assert fresh.read_text() == "new\n" and sorted(os.listdir(tmp_path)) == ["fresh.txt",
                                                                           "vectors.jsonl"]


def test_a_directory_output_never_replaces_one_that_appeared_or_changed(tmp_path):
    """publish_dir: a new target that another writer filled meanwhile, and an earlier output
    another writer replaced meanwhile, both stay as that writer left them."""
    def staged(text):
        staging = tmp_path / f"staging_{text}"
        (staging / "variables").mkdir(parents=True)
        (staging / "saved_model.pb").write_text(text)
        (staging / "variables" / "v.index").write_text(text)
        return str(staging)

    target = tmp_path / "EXPORT" / "1"
    target.parent.mkdir()
    expected = fileio.state(str(target))
    fileio.publish_dir(staged("theirs"), str(target))  # the other writer, first
    theirs = fileio.state(str(target))
    with pytest.raises(fileio.TargetChangedError, match=f"^{target} appeared or changed"):
        fileio.publish_dir(staged("mine"), str(target), expected)
    assert (target / "saved_model.pb").read_text() == "theirs"
    assert fileio.state(str(target)) == theirs
    # Replacing an earlier output (overwrite) that changed after the check: put back.
    expected = fileio.state(str(target))
    (target / "saved_model.pb").write_text("theirs, again")
    changed = fileio.state(str(target))
    with pytest.raises(fileio.TargetChangedError):
        fileio.publish_dir(staged("mine2"), str(target), expected)
    assert fileio.state(str(target)) == changed
    assert os.listdir(target.parent) == ["1"]  # nothing set aside is left
    # Unchanged since the check: replaced whole.
    fileio.publish_dir(staged("mine3"), str(target), fileio.state(str(target)))
    assert (target / "saved_model.pb").read_text() == "mine3"
    assert os.listdir(target.parent) == ["1"]


def test_a_directory_published_through_a_link_keeps_the_link_and_the_umasks_mode(tmp_path):
    """--overwrite through a symbolic link replaced the link with a directory (the old export
    left in a hidden .tmp_old_* beside it); staged directories were mkdtemp's 0700."""
    import stat

    served = tmp_path / "served" / "v1"
    served.mkdir(parents=True)
    (served / "saved_model.pb").write_text("old")
    (tmp_path / "exports").mkdir()
    link = tmp_path / "exports" / "1"
    os.symlink(served, link)
    expected = fileio.state(str(link))
    with fileio.staging_dir(str(link), ".tmp_export_") as staging:
        assert os.path.dirname(staging) == str(served.parent)  # beside the target: a rename
        assert stat.S_IMODE(os.stat(staging).st_mode) == 0o777 & ~fileio.current_umask()
        (Path(staging) / "saved_model.pb").write_text("new")
        fileio.publish_dir(staging, str(link), expected, prefix=".tmp_old_export_")
    assert os.path.islink(link) and (link / "saved_model.pb").read_text() == "new"
    assert os.listdir(tmp_path / "served") == ["v1"] and os.listdir(tmp_path / "exports") == ["1"]
