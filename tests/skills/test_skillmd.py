"""SKILL.md parsing and validation, as in Hermes, and safe rendering."""

from __future__ import annotations

import re

import pytest

from core.exceptions import ServiceError
from core.markdown import render_markdown
from skills_app import skillmd

from .conftest import skill_md

OK = "ok"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (skill_md("k8s-storage"), OK),
        ("\ufeff" + skill_md("with-bom"), OK),
        (skill_md("a"), OK),
        (skill_md("v1.2_tools-x"), OK),
        (skill_md("x" * 64), OK),
        (skill_md("off"), OK),
        (skill_md("010"), OK),
        (skill_md("x" * 65), "limit is 64"),
        (skill_md("K8s"), "Invalid skill name"),
        (skill_md("-leading-dash"), "Invalid skill name"),
        (skill_md(".hidden"), "Invalid skill name"),
        (skill_md("has space"), "Invalid skill name"),
        (skill_md("slash/name"), "Invalid skill name"),
        ("---\ndescription: no name\n---\n\nbody\n", "no 'name'"),
        ("---\nname: no-desc\n---\n\nbody\n", "no 'description'"),
        ("---\nname: blank-desc\ndescription: '   '\n---\n\nbody\n", "no 'description'"),
        (skill_md("long-desc", description="d" * 1024), OK),
        (skill_md("long-desc", description="d" * 1025), "limit is 1,024"),
        (skill_md("empty-body", body="   \n"), "body is empty"),
        ("---\nname: no-close\ndescription: x\n\nbody\n", "not closed"),
        ("no frontmatter at all\n", "must start with YAML frontmatter"),
        ("", "empty"),
        ("---\n- a\n- b\n---\n\nbody\n", "must be a YAML mapping"),
        ("---\nname: [unclosed\ndescription: x\n---\n\nbody\n", "not valid YAML"),
        ("---\nname: spaced-fence\ndescription: x\n---   \nbody\n", OK),
        (skill_md("huge", body="x" * 100_000), "limit is 100,000"),
    ],
)
def test_validation_table(content: str, expected: str) -> None:
    if expected == OK:
        parsed = skillmd.parse(content)
        assert parsed.name and parsed.description and parsed.body
    else:
        with pytest.raises(ServiceError) as info:
            skillmd.parse(content)
        assert expected in info.value.message


def test_yaml_1_1_booleans_and_numbers_stay_names() -> None:
    assert skillmd.parse(skill_md("off")).name == "off"
    assert skillmd.parse(skill_md("no")).frontmatter["name"] == "no"
    assert skillmd.parse(skill_md("010")).name == "010"
    assert skillmd.parse(skill_md("x", extra="enabled: true\n")).frontmatter["enabled"] is True


def test_tags_accept_a_list_or_a_comma_separated_string() -> None:
    assert skillmd.parse(skill_md("t1", extra="tags: [k8s, storage]\n")).tags == ["k8s", "storage"]
    assert skillmd.parse(skill_md("t2", extra="tags: 'k8s, storage'\n")).tags == ["k8s", "storage"]
    assert skillmd.parse(skill_md("t3", extra="tags: '[k8s, storage]'\n")).tags == [
        "k8s",
        "storage",
    ]


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("references/api.md", True),
        ("templates/deploy.yaml", True),
        ("scripts/check.sh", True),
        ("assets/img/logo.png", True),
        ("notes/api.md", False),
        ("references", False),
        ("references/", False),
        ("references/../SKILL.md", False),
        ("../etc/passwd", False),
        ("/etc/passwd", False),
        ("C:/windows/x", False),
        ("references\\api.md", False),
        ("references/.hidden", False),
        ("SKILL.md", False),
    ],
)
def test_file_paths_only_under_the_four_folders(path: str, ok: bool) -> None:
    if ok:
        assert skillmd.check_file_path(path) == path
    else:
        with pytest.raises(ServiceError):
            skillmd.check_file_path(path)


def test_category_is_optional_but_follows_the_name_rule() -> None:
    assert skillmd.check_category("") == ""
    assert skillmd.check_category("devops") == "devops"
    with pytest.raises(ServiceError):
        skillmd.check_category("dev/ops")


def test_rendering_drops_raw_html_scripts_and_foreign_images() -> None:
    html = render_markdown(
        "# Title\n\n<script>alert(1)</script>\n\n[ok](https://example.org) "
        "[bad](javascript:alert(1))\n\n![remote](https://evil.example/pixel.png)"
        "![local](/static/x.png)\n\n<img src=x onerror=alert(1)>"
    )
    assert "<h1>Title</h1>" in html
    assert "<script" not in html
    assert 'href="https://example.org"' in html
    assert 'href="javascript' not in html
    # A remote image is never loaded: it becomes a link the reader may choose to follow.
    assert not re.search(r"<img[^>]*evil\.example", html)
    assert '<a href="https://evil.example/pixel.png"' in html
    assert 'src="/static/x.png"' in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # raw HTML stays inert text
