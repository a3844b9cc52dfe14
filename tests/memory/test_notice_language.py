"""The chat notices of the memory tool are said in the person's language (their Account
page's choice), while what goes back to the model stays English."""

from __future__ import annotations

import json

import pytest

from sessions_app.agent.tools import registry
from tests.memory.conftest import set_profile, tool_ctx

pytestmark = pytest.mark.django_db


def call(user, **args):
    return registry.dispatch(tool_ctx(user), "memory", json.dumps(args), allowed={"memory"})


def test_a_chinese_reader_reads_the_notice_in_chinese(owner, outsider):
    set_profile(owner, language="zh-hans")
    set_profile(outsider, language="en")

    chinese = call(owner, action="add", target="memory", content="Deploys with Ansible.")
    english = call(outsider, action="add", target="memory", content="Deploys with Ansible.")

    assert chinese.notice == ("memory_saved", "记忆已更新")
    assert english.notice == ("memory_saved", "Memory updated")
    # The model reads the same English result whoever it works for.
    assert chinese.payload["message"] == english.payload["message"]
    assert chinese.payload["message"].isascii()

    profile = call(owner, action="add", target="user", content="Prefers short answers.")
    assert profile.notice == ("memory_saved", "用户资料已更新")


def test_a_change_waiting_for_approval_is_announced_in_chinese(owner):
    set_profile(owner, language="zh-hans", memory_write_approval=True)

    staged = call(owner, action="add", target="memory", content="Uses PostgreSQL 16.")

    assert staged.notice == ("memory_saved", "记忆的更改正在等待你的批准")
