"""The parser facts flag_facts writes into each commit's facts (compiler/_slime/parser_facts.py), read from small
files of slime's and Megatron-LM's shape: a mutation of either source changes the facts or stops the generator."""

from __future__ import annotations

import pytest

from acrl.compiler._slime.model_facts import FactsError
from acrl.compiler._slime.parser_facts import megatron_parser, sglang_parser

SGLANG = '''\
import argparse
from sglang_router.launch_router import RouterArgs


def add_sglang_router_arguments(parser):
    RouterArgs.add_cli_args(parser, use_router_prefix=True)
    return parser


def sglang_parse_args():
    temp = argparse.ArgumentParser(add_help=False, allow_abbrev=True)
    temp.parse_known_args()
    parser = argparse.ArgumentParser()
    add_sglang_router_arguments(parser)
    args, _ = parser.parse_known_args()
    return args
'''

MEGATRON = '''\
import argparse


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    parser = argparse.ArgumentParser(description='Megatron-LM Arguments',
                                     allow_abbrev=False)
    return parser.parse_known_args()
'''


def test_the_sglang_parser_its_line_abbreviations_and_router_call() -> None:
    assert sglang_parser(SGLANG) == {"file": "slime/backends/sglang_utils/arguments.py", "line": 10,
                                     "allow_abbrev": True, "router_line": 6}
    without_router = SGLANG.replace("    RouterArgs.add_cli_args(parser, use_router_prefix=True)\n", "")
    assert sglang_parser(without_router)["router_line"] is None
    strict = SGLANG.replace("parser = argparse.ArgumentParser()",
                            "parser = argparse.ArgumentParser(allow_abbrev=False)")
    assert sglang_parser(strict)["allow_abbrev"] is False  # the parser read last decides, not the pre-parser


def test_megatrons_parser_and_the_line_of_its_allow_abbrev() -> None:
    assert megatron_parser(MEGATRON) == {"file": "megatron/training/arguments.py", "line": 6, "allow_abbrev": False}
    default = MEGATRON.replace(",\n                                     allow_abbrev=False", "")
    assert megatron_parser(default) == {"file": "megatron/training/arguments.py", "line": 5, "allow_abbrev": True}


@pytest.mark.parametrize(("text", "reader"), [
    (SGLANG.replace("def sglang_parse_args", "def other_parse_args"), sglang_parser),
    (MEGATRON.replace("allow_abbrev=False", "allow_abbrev=STRICT"), megatron_parser),
    (MEGATRON.replace("    return parser", "    again = argparse.ArgumentParser()\n    return parser"),
     megatron_parser),
])
def test_a_source_it_cannot_read_stops_the_generator(text: str, reader: object) -> None:
    with pytest.raises(FactsError):
        reader(text)  # type: ignore[operator]
