"""runbook/as_data.py: input is data - which given values hold a template."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import as_data


class Unsafe(str):
    """Stands for a value marked !unsafe."""


def unsafe(value):
    return isinstance(value, Unsafe)


def test_a_template_anywhere_in_a_value_is_found_and_an_unsafe_one_passes():
    given = {"tfops_values": {"a": ["x", {"b": "{{ lookup('pipe', 'id') }}"}]},
             "tfops_secret_name": "{% for x in y %}", "tfops_namespace": "prod",
             "tfops_pools": {"{# key #}": 1}, "tfops_batch_percentage": 20,
             "tfops_chart": Unsafe("{{ as written }}"), "tfops_values_files": ["a.yaml", "b {x} c"]}
    assert as_data.templated(given, unsafe) == ["tfops_pools", "tfops_secret_name", "tfops_values"]
    assert as_data.templated({}, unsafe) == []


def test_the_refusal_names_the_variables_and_says_what_to_do():
    text = as_data.refusal(["tfops_values"])
    assert text.startswith("tfops_values: holds Jinja ('{{', '{%' or '{#')")
    assert "!unsafe" in text and "nothing was rendered or written" in text
    assert as_data.refusal(["a", "b"]).startswith("a, b: hold Jinja")
