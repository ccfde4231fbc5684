"""Text shown to a person: spec values reach the review tools' output, and a control character among them (a
terminal escape, a newline) is shown as an escape, never sent to the terminal."""


def printable(text: str) -> str:
    """``text`` with every control character (a terminal escape, a newline) shown as an escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
