"""docs/export.md's Python snippets run as written (the export, then ONNX Runtime and OpenVINO on the
files it wrote, giving what predict gives), and so do its `hpcnn export` commands."""
import re

import pytest

import hpcnn
from hpcnn import cli
from tests.support import paths
from tests.support.export_engines import assert_same, engine, randomize

ENGINES = ("onnx", "onnxruntime", "openvino")

SNIPPETS = re.findall(r"```python\n(.*?)```", (paths.ROOT / "docs" / "export.md").read_text(), re.S)


@pytest.fixture(autouse=True)
def engines():
    """Skipped with the reason without the packages (an error under HPCNN_EXPECT_EXPORT=1)."""
    for name in ENGINES:
        engine(name)


def test_the_pages_python_snippets_run(tmp_path, monkeypatch, capsys):
    assert len(SNIPPETS) == 3  # export, ONNX Runtime, OpenVINO
    monkeypatch.chdir(tmp_path)
    model = hpcnn.applications.tutorial_cnn(seed=1)
    randomize(model)
    exec(SNIPPETS[0], {"model": model})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "model.onnx", "model.xml"]
    for code in SNIPPETS[1:]:
        scope = {}
        exec(code, scope)
        assert_same(scope["scores"], model.predict(scope["images"]), code.splitlines()[1])


def test_the_commands_on_the_page_run(tmp_path, monkeypatch):
    commands = re.findall(r"^    (hpcnn export .*?)(?:  +#.*)?$", (paths.ROOT / "docs" / "export.md").read_text(), re.M)
    assert len(commands) == 4
    monkeypatch.chdir(tmp_path)
    model = hpcnn.applications.tutorial_cnn(seed=1)
    model.save("model.keras")
    model.save("model.h5")
    for command in commands:
        assert cli.main(command.split()[1:]) == 0, command
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "model.h5", "model.keras", "model.onnx",
                                                          "model.xml", "out.bin", "out.xml"]
