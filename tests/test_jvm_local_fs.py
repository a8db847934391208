"""The tests' JVMs run Hadoop's local file system with its per-file processes done in process
(tests/jvm/InProcessLocalFs.java): in effect in the suite's session, and answering as Hadoop's own."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from jvm_archive import _java, _local_fs


@pytest.fixture
def hadoop(spark: Any) -> Any:
    if _java() is None or _local_fs(_java()) is None:
        pytest.skip("no javac here: the tests run on Hadoop's own local file system")
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return jvm, jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI.create("file:///"), conf)


def test_the_session_runs_on_it(hadoop: Any) -> None:
    _, fs = hadoop
    assert fs.getClass().getName() == "statelens.tests.InProcessLocalFs$Checksummed"
    assert fs.getRaw().getClass().getName() == "statelens.tests.InProcessLocalFs$Raw"


@pytest.mark.parametrize("mode", [0o640, 0o755, 0o600, 0o1777])
def test_a_permission_set_is_the_files_mode(hadoop: Any, tmp_path: Path, mode: int) -> None:
    jvm, fs = hadoop
    target = tmp_path / "a"
    target.write_text("x")
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(target)), jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_a_link_is_a_link_and_a_file_a_file(hadoop: Any, tmp_path: Path) -> None:
    jvm, fs = hadoop
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "file", tmp_path / "link")
    path = jvm.org.apache.hadoop.fs.Path
    link = fs.getFileLinkStatus(path(str(tmp_path / "link")))
    assert link.isSymlink() and link.getSymlink().toUri().getPath() == str(tmp_path / "file")
    plain = fs.getFileLinkStatus(path(str(tmp_path / "file")))
    assert not plain.isSymlink() and plain.getLen() == 1
    with pytest.raises(Exception, match="FileNotFoundException"):
        fs.getFileLinkStatus(path(str(tmp_path / "absent")))
