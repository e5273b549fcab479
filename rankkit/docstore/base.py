"""The interface every document store implements."""

from __future__ import annotations

import abc
from typing import Iterable, Literal

from rankkit.errors import RankkitError, excerpt
from rankkit.formats.ids import docid_hash  # noqa: F401  (re-exported: docstores key their tables by it)

Missing = Literal["error", "skip"]


class MissingDocumentsError(RankkitError):
    """Docids that the store does not hold; the message lists a few of them."""

    def __init__(self, missing: list[str], source: str) -> None:
        self.missing = missing
        shown = ", ".join(excerpt(d) for d in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        super().__init__(f"{len(missing)} docid(s) not found in {source}: {shown}{more}")


class DocStore(abc.ABC):
    """Passage text by docid. Use as a context manager, or call :meth:`close`."""

    source: str

    @abc.abstractmethod
    def get_many(self, docids: Iterable[str], *, missing: Missing = "error") -> dict[str, str]:
        """Texts of ``docids`` as ``{docid: text}``.

        A docid the store does not hold raises :class:`MissingDocumentsError` (listing a few), or
        is left out of the result with ``missing="skip"``.
        """

    def get(self, docid: str) -> str:
        """The text of one document; raises :class:`MissingDocumentsError` if it is not held."""
        return self.get_many([docid])[docid]

    def __contains__(self, docid: object) -> bool:
        return isinstance(docid, str) and bool(self.get_many([docid], missing="skip"))

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of documents held."""

    def close(self) -> None:  # noqa: B027  (a no-op default: stores without resources need no override)
        """Release files (and Java objects)."""

    def __enter__(self) -> "DocStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
