"""The built-in react harness's options."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from openforge.harness import LaunchContext, get_adapter
from openforge.harness.react_agent import TOOLS, select_tools


def ctx(instruction: str) -> LaunchContext:
    return LaunchContext(
        PurePosixPath("/b"), PurePosixPath("/h"), PurePosixPath("/w"), "http://127.0.0.1:1", "k", "m", instruction
    )


def test_tool_subset_reaches_the_agent_command_line():
    launch = get_adapter("react", tools=("bash",)).launch(ctx("do it"))
    assert launch.argv[launch.argv.index("--tools") + 1] == "bash"
    assert "--tools" not in get_adapter("react").launch(ctx("x")).argv


def test_select_tools():
    assert select_tools(None) == TOOLS
    assert [t["function"]["name"] for t in select_tools(["submit", "bash"])] == ["submit", "bash"]
    with pytest.raises(ValueError, match="unknown tool"):
        select_tools(["rm"])


def test_system_prompt_option_reaches_the_agent_command_line():
    launch = get_adapter("react", system_prompt="").launch(ctx("do it"))
    assert launch.argv[launch.argv.index("--system-prompt") + 1] == ""
    assert "--system-prompt" not in get_adapter("react").launch(ctx("x")).argv
