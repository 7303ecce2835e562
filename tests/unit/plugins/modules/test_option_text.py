"""Every text option of every module (#46 item 6): one printable line of at most MAX_TEXT, or, for
the prose and expression options, at most MAX_FREE_TEXT with line breaks; refused by name before
the module reads or writes anything (core/module.run). The modules' real argument specs are
taken from their main()."""
import importlib
import pkgutil

import pytest

from ansible_collections.tensorfusion.ops.plugins import modules as modules_pkg
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import option_text


class _Spec(Exception):
    def __init__(self, spec):
        super().__init__("spec")
        self.spec = spec


def module_specs():
    """{module: its whole argument spec (its options and the auth options)}."""
    specs = {}
    real = tfmodule.new_module

    def capture(options, **_kwargs):
        raise _Spec(tfmodule.argument_spec(**options))
    tfmodule.new_module = capture
    try:
        for info in pkgutil.iter_modules(modules_pkg.__path__):
            mod = importlib.import_module("%s.%s" % (modules_pkg.__name__, info.name))
            if not hasattr(mod, "main") or "tfmodule" not in vars(mod):
                continue  # an action-only module (runbook_guard) has no argument spec of its own
            try:
                mod.main()
            except _Spec as found:
                specs[info.name] = found.spec
    finally:
        tfmodule.new_module = real
    return specs


def text_options(spec, prefix=""):
    """(path as a message names it, params holding a value there, whether it is free text) of every
    str and path option, list element and suboption; no_log ones left out."""
    found = []
    for option, entry in spec.items():
        if entry.get("no_log"):
            continue
        kind, sub, name = entry.get("type", "str"), entry.get("options"), prefix + option
        free = option in option_text.FREE_TEXT
        if kind in ("str", "path"):
            found.append((name, lambda v, o=option: {o: v}, free))
        elif kind == "list" and entry.get("elements") in ("str", "path"):
            found.append(("%s[0]" % name, lambda v, o=option: {o: [v]}, free))
        if sub and kind == "dict":
            found += [(n, lambda v, o=option, make=make: {o: make(v)}, f) for n, make, f in text_options(sub, name + ".")]
        elif sub and kind == "list":
            found += [(n, lambda v, o=option, make=make: {o: [make(v)]}, f)
                      for n, make, f in text_options(sub, "%s[0]." % name)]
    return found


SPECS = module_specs()
CASES = [(m, n, make, free) for m, spec in sorted(SPECS.items()) for n, make, free in text_options(spec)]


def test_every_module_is_walked():
    assert len(SPECS) >= 14 and len(CASES) > 100, (sorted(SPECS), len(CASES))


@pytest.mark.parametrize("module, name, make, free", CASES, ids=["%s-%s" % (c[0], c[1]) for c in CASES])
def test_a_text_option_is_bounded_and_one_line_unless_free(module, name, make, free):
    spec = SPECS[module]
    assert option_text.problems(spec, make("tensor-fusion-sys")) == []
    long_text = "x" * ((option_text.MAX_FREE_TEXT if free else option_text.MAX_TEXT) + 1)
    assert [p for p in option_text.problems(spec, make(long_text)) if p.startswith(name + " ")] == [
        "%s is %d characters long; text is at most %d" % (name, len(long_text), len(long_text) - 1)]
    two_lines = option_text.problems(spec, make("ops\nTASK [forged]"))
    if free:
        assert two_lines == []
        assert option_text.problems(spec, make("a\x00b")) == [
            "%s holds a control character other than a line break or a tab" % name]
    else:
        assert two_lines == ["%s holds a line break or another control character; one line of text is expected" % name]


def test_secret_options_are_never_looked_at():
    spec = {"signing_key": {"type": "str", "no_log": True}, "data": {"type": "raw"}}
    assert option_text.problems(spec, {"signing_key": "k\n" * 50000, "data": "x\n"}) == []
