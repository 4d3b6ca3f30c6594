"""Small text helpers used by the dev-review example."""


def word_count(text: str) -> int:
    """Number of whitespace-separated words in `text`."""
    return len(text.split())


def truncate(text: str, width: int) -> str:
    """Shorten `text` to at most `width` characters, ending with '...' when cut."""
    if len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."
