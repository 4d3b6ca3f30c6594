"""podium.templating.text holds what the template checks need without Jinja2; these tests
keep it equal to what the environment itself has, and podium.templating.kinds honest."""

from __future__ import annotations

import pytest

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


def test_a_kind_matches_jinjas_nodes_and_the_light_ones_by_name() -> None:
    """kinds.X holds for a node of Jinja's class X, of lightparse.py's, and of a class under
    either named X (`kinds.Expr` for any expression), and never for a value that is no
    node, whatever its class's name."""
    from jinja2 import nodes

    from podium.templating import kinds, lightparse

    jinja_tree = make_environment().parse("{{ a.b | f }}{% if c %}x{% endif %}")
    light_tree = lightparse.light_parse("{{ a.b | f }}{% if c %}x{% endif %}")
    assert light_tree is not None
    for tree in (jinja_tree, light_tree):
        assert isinstance(tree, kinds.Template)
        found = [type(n).__name__ for n in tree.find_all(kinds.Expr)]
        assert found == ["Filter", "Getattr", "Name", "Name", "TemplateData"]
        assert [type(n).__name__ for n in tree.find_all((kinds.If, kinds.Output))] == [
            "Output", "If", "Output"]
        assert not isinstance(tree, (kinds.Expr, kinds.Stmt, kinds.For))
    assert isinstance(nodes.Const(1), kinds.Literal)
    assert not isinstance(nodes.Const(1), kinds.Name)

    class List(list[int]):  # a value named as a node kind is still no node
        pass

    assert not isinstance(List(), kinds.List)
    assert not isinstance((1, 2), kinds.Tuple)
    assert repr(kinds.Getattr) == "<node kind Getattr>"
    assert kinds.Getattr is kinds.Getattr
    with pytest.raises(AttributeError):
        kinds.__wrapped__  # noqa: B018


def test_podiums_environment_lexes_as_the_quick_reader_assumes() -> None:
    """The checks call quick_refs(None, ...): None stands for podium's own environment,
    which must pass the test scan() would apply to it."""
    from podium.templating.quickparse import plain_lexing, scan

    for env in (make_environment(), TemplateEngine().env):
        assert plain_lexing(env)
    source = "Hi {{ a.b }}{% if c.d is defined %} {{ c.d | length }}{% endif %}"
    assert scan(None, source) == scan(make_environment(), source) is not None
