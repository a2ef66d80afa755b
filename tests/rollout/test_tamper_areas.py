"""The tamper check by areas (`openforge.rollout.tamper`) on real sandboxes: each change an agent can make to
what the verifier runs, loads or imports — the system directories themselves, the interpreter's standard
library, its zipped library and `pyvenv.cfg`, the work area through links — is graded as tampering (reward 0),
in Docker and in the local sandbox, through the same path as every episode (`run_script_and_verify`:
`openforge.rollout.grading`); a pip-style install of a new package is not. Where the local sandbox does not
let the agent make the change at all (the host's system directories are read-only there, its root is not the
agent's), that is checked instead. Every class here was judged harmless before issue 25."""

from __future__ import annotations

import zipfile

import pytest

from openforge.rollout.validate import run_script_and_verify
from openforge.sandbox import get_provider
from openforge.tasks import ImageMap, load_task
from support.rollout import IMAGE_MAP, make_task

MAP = ImageMap(IMAGE_MAP)
RUN = "pytest-tamper-areas"
STDLIB = "$(python3 -c 'import sysconfig; print(sysconfig.get_path(\"stdlib\"))')"

# name → (the agent's script, run in the work area; the path the tamper check must name)
CLASSES = {
    "/bin replaced by a link": (
        "mkdir -p /tmp/evil && ln -s /usr/bin/dash /tmp/evil/sh && rm /bin && ln -s /tmp/evil /bin",
        "/bin",
    ),
    "empty PATH directory replaced by a link": (
        "rmdir /usr/local/sbin && ln -s /tmp /usr/local/sbin",
        "/usr/local/sbin",
    ),
    "package directory beside a stdlib module": (
        f"mkdir {STDLIB}/csv && printf 'raise SystemExit(0)\\n' > {STDLIB}/csv/__init__.py",
        "/usr/lib/python3.11/csv",
    ),
    "python3XY.zip": (
        "printf 'raise SystemExit(0)\\n' > /tmp/json.py && python3 -m zipfile -c /usr/lib/python311.zip /tmp/json.py",
        "/usr/lib/python311.zip",
    ),
    "pyvenv.cfg": ("printf 'home = /tmp\\n' > /usr/pyvenv.cfg", "/usr/pyvenv.cfg"),
    "module-named link in the work area": (
        "mkdir -p /tmp/fake/json && printf 'raise SystemExit(0)\\n' > /tmp/fake/json/__init__.py && "
        'ln -s /tmp/fake/json "$PWD/json"',
        "/app/json",
    ),
    "work area replaced by a link": (
        'W=$PWD; cp -a "$W" /tmp/copy && cd / && rm -rf "$W" && ln -s /tmp/copy "$W"',
        "/app",
    ),
}
# The local sandbox's system directories and interpreter are the host's, read-only, and its root is not the
# agent's: the agent cannot make these changes there at all.
REFUSED_LOCALLY = {
    "/bin replaced by a link",
    "empty PATH directory replaced by a link",
    "package directory beside a stdlib module",
    "python3XY.zip",
    "pyvenv.cfg",
    "work area replaced by a link",
}


def pip_style_install(directory):
    """A wheel of a new package, installed as pip installs it: unpacked into the packages directory,
    byte-compiled, with its console script in /usr/local/bin."""
    with zipfile.ZipFile(directory / "newpkg-1.0-py3-none-any.whl", "w") as whl:
        whl.writestr("newpkg/__init__.py", "def main():\n    print('hello')\n")
        whl.writestr("newpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: newpkg\nVersion: 1.0\n")
        whl.writestr("newpkg-1.0.dist-info/RECORD", "")
    site = "$(python3 -c 'import site; print(site.getsitepackages()[0])')"
    return (
        f'S={site}; mkdir -p "$S" && python3 -m zipfile -e newpkg-1.0-py3-none-any.whl "$S" && '
        'echo pip > "$S/newpkg-1.0.dist-info/INSTALLER" && python3 -m compileall -q "$S/newpkg" && '
        "printf '#!/usr/bin/python3\\nfrom newpkg import main\\nmain()\\n' > /usr/local/bin/newpkg && "
        "chmod +x /usr/local/bin/newpkg && newpkg"
    )


@pytest.fixture(params=["local", "docker"])
async def provider(request, tmp_path):
    if request.param == "local":
        request.getfixturevalue("local_ready")
        p = get_provider("local", root=tmp_path / "sandboxes")
    else:
        request.getfixturevalue("docker_ready")
        p = get_provider("docker")
    yield p
    await p.cleanup(RUN)
    await p.close()


def _script(tmp_path, name, body):
    d = tmp_path / name.replace(" ", "-").replace("/", "")
    d.mkdir()
    (d / "solve.sh").write_text("#!/bin/bash\nset -e\n" + body + "\n")
    return d / "solve.sh"


@pytest.mark.parametrize("name", sorted(CLASSES))
async def test_each_area_class_is_tampering(provider, tmp_path, name):
    task = load_task(make_task(tmp_path / "tasks", "areas"))
    body, path = CLASSES[name]
    out = await run_script_and_verify(task, provider, MAP, _script(tmp_path, name, body), name, run=RUN)
    if provider.name == "local" and name in REFUSED_LOCALLY:
        assert out.solution_exit != 0 and not out.tampered, (out.solution_output, out.tampered)
        assert out.error is None and out.reward == 0.0, out
        return
    assert out.solution_exit == 0, out.solution_output
    assert out.tampered and path in out.tampered, (out.tampered, out.tamper_reason)
    assert out.reward == 0.0 and out.tamper_reason.startswith("tampered: ")


async def test_a_pip_style_install_of_a_new_package_is_not_tampering(provider, tmp_path):
    task = load_task(make_task(tmp_path / "tasks", "install", solve="touch done.txt\n"))
    script = _script(tmp_path, "pip", "")
    body = pip_style_install(script.parent)
    if provider.name == "local":  # the host's /usr is read-only there: the package goes to the user's site
        body = body.replace("site.getsitepackages()[0]", "site.getusersitepackages()").split(" && printf")[0]
    script.write_text(f"#!/bin/bash\nset -e\n{body}\ntouch done.txt\n")
    out = await run_script_and_verify(task, provider, MAP, script, "pip-style install", run=RUN)
    assert out.solution_exit == 0, out.solution_output
    assert out.tampered == [] and out.error is None and out.reward == 1.0, (out.tamper_reason, out)
