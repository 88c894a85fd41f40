"""Argument types shared by the sub-commands of every package."""

from __future__ import annotations

import argparse

import pytest

from embodied_core.cli.arguments import index_list


def test_index_list_reads_indices_and_ranges_in_order() -> None:
    assert index_list("0-3,7") == [0, 1, 2, 3, 7]
    assert index_list(" 12 , 2-2") == [12, 2]


@pytest.mark.parametrize("text", ["", "a", "3-", "-2", "5-3", "1,,2", "1.5"])
def test_bad_index_lists_name_the_text_and_the_form(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected indices and ranges like 0-9,12"):
        index_list(text)


def test_a_sub_command_reports_a_bad_list_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from embodied_data.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["stats", ".", "--episodes", "3-1"])
    assert exit_info.value.code == 2
    assert "--episodes" in capsys.readouterr().err
