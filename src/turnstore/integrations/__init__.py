"""Adapters that put turnstore under the agent frameworks people already use.

Each adapter lives in its own module and imports its framework only there, so `import
turnstore` never needs one; install a framework with its extra (`turnstore[openai-agents]`).
An adapter imported without its framework says which extra to install (`requires_extra`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def requires_extra(module: str, framework: str, extra: str) -> Iterator[None]:
    """Around an adapter's framework imports: a missing module names the extra to install.

    The error stays a `ModuleNotFoundError` (an `ImportError`), for code that probes for
    optional adapters; only its message changes, from the bare module name to what to run.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        # Only framework imports (and the adapter's modules made of them) run in this block,
        # so whatever is missing, the framework or one of its dependencies, the extra installs.
        raise ModuleNotFoundError(
            f"{module} needs {framework}, which is not installed (no module named "
            f"{error.name!r}): pip install 'turnstore[{extra}]'",
            name=error.name,
        ) from None
