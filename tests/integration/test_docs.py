"""Every tool's --help, man page and example file agree, and every man page lints clean
(docs must not drift)."""
import glob
import os
import re
import shlex
import shutil

import pytest

from conftest import ROOT, help_options, man_fields, man_options, man_sections, run, tool_path

TOOLS = sorted(f[:-2] for f in os.listdir(os.path.join(ROOT, "tools")) if f.endswith(".c"))
MAN_PAGES = sorted(os.path.relpath(p, ROOT)
                   for p in glob.glob(os.path.join(ROOT, "man", "man*", "*.*")))
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


def schema_fields(tool):
    """{(metric, kind, field)} as TOOL --fields lists its record schemas."""
    out = run([tool_path(tool), "--fields"], check=False)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split("\t") == ["METRIC", "KIND", "FIELD", "TYPE", "UNIT", "MEANING"]
    rows = [l.split("\t") for l in lines[1:]]
    assert rows and all(len(r) == 6 and r[5] for r in rows), "every field has a meaning"
    return {(r[0], r[1], r[2]) for r in rows}


@pytest.mark.parametrize("tool", TOOLS)
def test_man_fields_agree_with_the_schemas(tool):
    """FIELDS documents every field of every event record, and only fields that exist."""
    fields = schema_fields(tool)
    documented = man_fields(tool)
    events = {f for _, kind, f in fields if kind == "event"}
    assert events <= documented, "%s.8 FIELDS lacks %s" % (tool, sorted(events - documented))
    known = {f for _, _, f in fields}
    assert documented <= known, "%s.8 FIELDS has fields no record has: %s" % (tool, sorted(documented - known))


def test_there_are_man_pages():
    assert "man/man7/pyebpf.7" in MAN_PAGES
    assert all("man/man8/%s.8" % t in MAN_PAGES for t in TOOLS)


@pytest.mark.parametrize("page", MAN_PAGES)
def test_man_page_lints_clean(page):
    """mandoc finds nothing at warning level or above (style notes are not failures)."""
    if not shutil.which("mandoc"):
        pytest.fail("mandoc is not installed (make deps installs it)")
    res = run(["mandoc", "-T", "lint", "-W", "warning", os.path.join(ROOT, page)], check=False)
    assert res.returncode == 0 and not res.stdout.strip() and not res.stderr.strip(), \
        "%s:\n%s%s" % (page, res.stdout, res.stderr)


def rendered_examples(tool, width):
    """The EXAMPLES section of TOOL.8 as mandoc renders it (overstrikes removed)."""
    out = run(["mandoc", "-T", "utf8", "-O", "width=%d" % width,
               os.path.join(ROOT, "man", "man8", tool + ".8")]).stdout
    text = re.sub(".\b", "", out)
    return text[text.index("\nEXAMPLES\n"):text.index("\nFIELDS\n")]


@pytest.mark.parametrize("tool", TOOLS)
def test_example_commands_survive_rendering(tool):
    """A command pasted from the rendered page runs: its quotes are kept, nothing is hyphenated,
    the shell parses it, and every jq filter in it compiles."""
    for width in (60, 70, 78):  # man(1) renders with groff, which hyphenates (mandoc does not)
        out = run(["groff", "-man", "-Tutf8", "-rLL=%dn" % width,
                   os.path.join(ROOT, "man", "man8", tool + ".8")]).stdout
        text = re.sub(".\b", "", out)
        assert "\u2010" not in text[text.index("\nEXAMPLES\n"):text.index("\nFIELDS\n")], \
            "hyphenated in EXAMPLES at width %d" % width
    cmds = [l.strip() for l in rendered_examples(tool, 1000).splitlines()
            if l.strip().startswith(tool + " ") or l.strip() == tool]
    assert cmds, "no %s command in EXAMPLES" % tool
    for cmd in cmds:
        r = run(["bash", "-n", "-c", cmd], check=False)
        assert r.returncode == 0, (cmd, r.stderr)
        lexer = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        for i, w in enumerate(words):
            if w == "jq":
                args = [a for a in words[i + 1:] if not a.startswith("-")]
                # compile only: errors of running it on null are caught, syntax errors are not
                r = run(["jq", "-n", "try (%s) catch empty" % args[0]], check=False)
                assert r.returncode == 0, (cmd, r.stderr)


def test_readme_first_steps_use_options_the_tools_have():
    """The newcomer's commands in README.md run tools straight from build/ with options
    their --help lists (a renamed option, such as tcploss's -c, fails this)."""
    import re
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = [l.strip() for l in f if "build/" in l and l.startswith("    ")]
    assert len(lines) >= 3
    for line in lines:
        for part in line.split("|"):
            m = re.search(r"build/(\w+)((?: \S+)*)", part)
            if not m:
                continue
            known = help_options(m.group(1))
            shorts = {s for s, _ in known if s}
            longs = {l for _, l in known}
            for word in m.group(2).split():
                if word.startswith("--"):
                    assert word[2:] in longs, (line, word)
                elif word.startswith("-") and not word[1:].isdigit():
                    assert word[1:] in shorts, (line, word)
