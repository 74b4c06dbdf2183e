"""How an error reads to a person: one line, its message, typed only where the type says more.

The CLI (`commands.common.describe_error`) and the viewer (`view.app`) show the same line for the
same failure, so a damaged lake reads alike in a terminal and in a browser.
"""

from __future__ import annotations

__all__ = ["one_line"]

_PLAIN = (FileNotFoundError, FileExistsError, ValueError, KeyError, RuntimeError, OSError)


def one_line(e: BaseException) -> str:
    """`e` as one line of text.

    A KeyError of one key (`KeyError('state')`) reads "missing key 'state'"; a KeyError raised with
    a sentence (`KeyError("the policy was not trained on embodiment 'x'; ...")`) is that sentence.
    Types whose name adds nothing to the message (ValueError, OSError, ...) are left out.
    """
    text = str(e) or type(e).__name__
    if isinstance(e, KeyError):
        arg = e.args[0] if len(e.args) == 1 else None
        text = arg if isinstance(arg, str) and " " in arg.strip() else f"missing key {text}"
    if not isinstance(e, _PLAIN):
        text = f"{type(e).__name__}: {text}"
    return " ".join(text.split())
