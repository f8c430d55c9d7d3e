"""Every tool's --help, man page and example file agree (docs must not drift)."""
import os

import pytest

from conftest import ROOT, help_options, man_options, man_sections, tool_path

TOOLS = sorted(f[:-2] for f in os.listdir(os.path.join(ROOT, "tools")) if f.endswith(".c"))
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "REQUIREMENTS", "OPTIONS", "EXAMPLES", "FIELDS",
            "OVERHEAD", "SOURCE", "OS", "STABILITY", "SEE ALSO"]


def test_there_are_tools():
    assert "tcphandshake" in TOOLS


@pytest.mark.parametrize("tool", TOOLS)
def test_man_page_has_bcc_sections(tool):
    assert list(man_sections(tool)) == SECTIONS


@pytest.mark.parametrize("tool", TOOLS)
def test_help_and_man_options_agree(tool):
    assert os.path.exists(tool_path(tool)), "%s is not built" % tool
    assert help_options(tool) == man_options(tool)


@pytest.mark.parametrize("tool", TOOLS)
def test_example_file_exists_with_real_output(tool):
    path = os.path.join(ROOT, "tools", tool + "_example.txt")
    with open(path) as f:
        text = f.read()
    assert "# " + tool in text or "#" + tool in text or tool in text.splitlines()[0]
    assert len(text.splitlines()) > 10
