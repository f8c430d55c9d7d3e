"""What every tool does with its command line, before it traces anything."""
import os

import pytest

from conftest import ROOT, help_options, run, tool_path

TOOLS = sorted(f[:-2] for f in os.listdir(os.path.join(ROOT, "tools")) if f.endswith(".c"))
PID_TOOLS = [t for t in TOOLS if ("p", "pid") in help_options(t)]


def test_the_pid_tools_are_found():
    assert {"tcphandshake", "pystack", "pygc"} <= set(PID_TOOLS)


@pytest.mark.parametrize("tool", PID_TOOLS)
@pytest.mark.parametrize("arg", ["", ",", " ", " , "])
def test_an_empty_pid_list_is_a_usage_error(tool, arg):
    """`-p "$(pgrep nosuch)"` must not trace the whole host."""
    r = run([tool_path(tool), "-p", arg, "-d", "1"], check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--pid" in r.stderr and "--help" in r.stderr
    assert r.stdout == ""
