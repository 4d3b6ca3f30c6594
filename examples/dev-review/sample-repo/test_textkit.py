"""Tests for textkit; the slugify tests fail until the ticket is implemented."""

import pytest

import textkit


def test_word_count():
    assert textkit.word_count("one two  three\nfour") == 4
    assert textkit.word_count("") == 0


def test_truncate():
    assert textkit.truncate("short", 10) == "short"
    assert textkit.truncate("a longer sentence", 10) == "a longe..."


# Calling through the module makes a missing slugify fail each test, not the collection.
@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Hello World", "hello-world"),
        ("  Hello,   World!  ", "hello-world"),
        ("Python 3.12 is out", "python-3-12-is-out"),
        ("Café déjà vu", "cafe-deja-vu"),
        ("--already-a-slug--", "already-a-slug"),
        ("", ""),
    ],
    ids=["words", "punctuation", "digits", "accents", "edges", "empty"],
)
def test_slugify(text, slug):
    assert textkit.slugify(text) == slug
