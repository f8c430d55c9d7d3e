"""tools/deploy: the systemd unit and the Kubernetes DaemonSet give pymonitor exactly the
capabilities its man page's REQUIREMENTS lists, and systemd accepts the unit."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT, man_capabilities

UNIT = os.path.join(ROOT, "tools", "deploy", "pymonitor.service")
DAEMONSET = os.path.join(ROOT, "tools", "deploy", "pymonitor-daemonset.yaml")


def unit_values(key):
    with open(UNIT) as f:
        return [l.split("=", 1)[1].strip() for l in f if l.startswith(key + "=")]


def test_unit_capabilities_are_pymonitors_requirements():
    needed, _ = man_capabilities("pymonitor")
    for key in ("CapabilityBoundingSet", "AmbientCapabilities"):
        (value,) = unit_values(key)
        assert sorted(value.split()) == sorted(needed), (key, value, needed)
    assert unit_values("NoNewPrivileges") == ["yes"] and unit_values("ProtectSystem") == ["strict"]
    assert unit_values("DynamicUser") == ["yes"] and unit_values("User") == ["pymonitor"]
    assert unit_values("StateDirectory") == ["pymonitor"] and unit_values("PrivateTmp") == ["yes"]
    assert unit_values("ProtectHome") == ["yes"]
    assert any(v.startswith("clickhouse-password:") for v in unit_values("LoadCredential"))


def test_daemonset_capabilities_are_pymonitors_requirements():
    yaml = pytest.importorskip("yaml", reason="python3-yaml is not installed (make deps)")
    with open(DAEMONSET) as f:
        ds = yaml.safe_load(f)
    needed, _ = man_capabilities("pymonitor")
    spec = ds["spec"]["template"]["spec"]
    assert ds["kind"] == "DaemonSet" and spec["hostPID"] is True
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert sc["privileged"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert sorted("CAP_" + c for c in sc["capabilities"]["add"]) == sorted(needed)
    assert container["resources"]["limits"]["memory"] and container["resources"]["requests"]["memory"]


def analyzable_unit(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is missing (apt-get install systemd; make deps does)")
    with open(UNIT) as f:
        text = f.read().replace("/usr/local/sbin/pymonitor", os.path.join(BUILD, "pymonitor"))
    path = tmp_path / "pymonitor.service"
    path.write_text(text)
    return str(path)


def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", analyzable_unit(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_systemd_analyze_security_score_is_the_documented_one(tmp_path):
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", analyzable_unit(tmp_path)],
                       capture_output=True, text=True)
    m = re.search(r"Overall exposure level for pymonitor.service: ([\d.]+) (\w+)", r.stdout + r.stderr)
    assert m, r.stdout[-2000:] + r.stderr
    with open(os.path.join(ROOT, "man", "man7", "pyebpf.7")) as f:
        page = f.read()
    assert "exposure level of %s (%s)" % (m.group(1), m.group(2)) in page, m.group(0)
    assert float(m.group(1)) <= 3.0
