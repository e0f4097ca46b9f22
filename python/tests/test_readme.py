"""The README's Python, run as written: the install route without PyPI, and
the training example on real shards (issue 32: every command in the README
runs as written on a fresh Debian 12)."""

import os
import re
import shutil
import subprocess
import sys

from conftest import ROOT, missing, need

README = os.path.join(ROOT, "README.md")


def _section(title):
    text = open(README, encoding="utf-8").read()
    start = text.index("\n## " + title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def test_install_route(tmp_path):
    """The README's venv commands install prepshards beside Debian's torch."""
    block = re.search(r"```sh\n(python3 -m venv.*?)```", _section("Install"), re.S)
    assert block, "README's Install has no venv block"
    if shutil.which("python3") is None:
        missing("python3")
    venv = subprocess.run(["/usr/bin/python3", "-c", "import venv, ensurepip"], capture_output=True)
    if venv.returncode != 0:
        missing("python3-venv (apt-get install python3-venv)")
    # As written, with the home folder a temporary one, from the checkout.
    env = dict(os.environ, HOME=str(tmp_path), PATH="/usr/bin:/bin")
    for line in block.group(1).strip().splitlines():
        p = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True)
        assert p.returncode == 0, f"{line}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    code = ("import prepshards, torch, numpy; from prepshards import _native; "
            "print(prepshards.__file__, _native.path(), _native.why_not)")
    p = subprocess.run([str(tmp_path / "prep-venv/bin/python"), "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and str(tmp_path) in p.stdout, p.stderr
    # pip built the C crop/flip kernel (python/setup.py) with the package
    assert " numpy " not in p.stdout, p.stdout


def test_training_example(shards, tmp_path):
    """The README's training example runs as written, on CPU, against shards in ./shards."""
    need("torch")
    block = re.search(r"```python\n(.*?)```", _section("Training from the shards"), re.S)
    assert block, "README's training section has no python block"
    shutil.copytree(shards["img_h5"], tmp_path / "shards")
    p = subprocess.run([sys.executable, "-c", block.group(1)], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")), timeout=300)
    assert p.returncode == 0, p.stderr
