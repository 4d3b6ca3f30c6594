"""podium.templating.text holds what the template checks need without Jinja2; these tests
keep it equal to what the environment itself has, and podium.lazymodule honest."""

from __future__ import annotations

import subprocess
import sys

import pytest

from podium.lazymodule import LazyModule
from podium.templating import TemplateEngine, make_environment
from podium.templating.text import FILTER_NAMES, TEST_NAMES


def test_the_filter_and_test_names_are_the_environments_in_its_order() -> None:
    for env in (make_environment(), TemplateEngine().env):
        assert list(FILTER_NAMES) == list(env.filters)
        assert list(TEST_NAMES) == list(env.tests)


def test_the_package_names_what_its_modules_define() -> None:
    import podium.templating as templating
    from podium.templating import budget, engine, text

    for name in templating.__all__:
        value = getattr(templating, name)
        home = next(m for m in (text, engine, budget) if hasattr(m, name))
        assert value is getattr(home, name), name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        templating.nothing  # noqa: B018


def test_a_lazy_module_imports_at_its_first_attribute() -> None:
    code = ("import sys\n"
            "from podium.lazymodule import LazyModule\n"
            "m = LazyModule('colorsys')\n"
            "print('colorsys' in sys.modules, repr(m))\n"
            "value = m.rgb_to_hsv\n"
            "import colorsys\n"
            "print('colorsys' in sys.modules, value is colorsys.rgb_to_hsv,\n"
            "      'rgb_to_hsv' in vars(m))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "False <lazy module 'colorsys'>"
    assert out[1] == "True True True"
    with pytest.raises(AttributeError):
        LazyModule("colorsys").no_such_function  # noqa: B018
    with pytest.raises(AttributeError):
        LazyModule("colorsys").__wrapped__  # noqa: B018


def test_podiums_environment_lexes_as_the_quick_reader_assumes() -> None:
    """The checks call quick_refs(None, ...): None stands for podium's own environment,
    which must pass the test scan() would apply to it."""
    from podium.templating.quickparse import _plain, scan

    for env in (make_environment(), TemplateEngine().env):
        assert _plain(env)
    source = "Hi {{ a.b }}{% if c.d is defined %} {{ c.d | length }}{% endif %}"
    assert scan(None, source) == scan(make_environment(), source) is not None
