"""The declaration of an attached deployment: which pair of the bundle it serves, and at which γ.

A JSON file (``--engine-option declaration=FILE``)::

    {"pair": "main", "gamma": 3, "dialect": "openai",
     "target_sha256": "<model.safetensors of the target>", "draft_sha256": "<... of the draft, or null>"}

``pair`` names a pair of the bundle's manifest (``specverify models export``), ``gamma`` the drafts per round the
deployment runs (null: no speculation), the two digests the weights it loaded (copied from the manifest). A decoder
is made only for the pair whose weights match; the others are refused at set-up with the pair that is served, so a
run is restricted to that pair's scenarios (``--scenario``; docs/servers.md). A request of another γ is served at
the deployment's γ: the law is the same at every γ, so the verdict holds, and the certificate records the γ served.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from specverify.errors import InvalidArgument, check

__all__ = ["Declaration", "read_declaration", "weights_sha256"]

WEIGHTS = "model.safetensors"


def weights_sha256(model) -> Optional[str]:
    """The sha256 of a checkpoint model's ``model.safetensors`` (None: the model has no ``.path``)."""
    path = getattr(model, "path", None)
    if path is None:
        return None
    digest = hashlib.sha256()
    with open(Path(path) / WEIGHTS, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Declaration:
    pair: str
    gamma: Optional[int]
    dialect: str
    target_sha256: str
    draft_sha256: Optional[str] = None

    def check_serves(self, target, draft) -> None:
        """``InvalidArgument`` unless the deployment serves this ``target`` (and ``draft``, when declared)."""
        if weights_sha256(target) != self.target_sha256 or (
            self.draft_sha256 is not None and weights_sha256(draft) != self.draft_sha256
        ):
            raise InvalidArgument(
                f"the attached deployment serves pair {self.pair!r} (its declaration's digests), not the pair "
                f"{getattr(target, 'path', target)!s}: restrict the run to that pair's scenarios "
                "(docs/servers.md, attached mode), the others are not covered by this deployment."
            )

    def record(self) -> dict:
        """What the certificate records of the declaration."""
        return asdict(self)


def read_declaration(path: object) -> Declaration:
    """The declaration in the JSON file ``path``; ``InvalidArgument`` naming what is wrong."""
    check(isinstance(path, (str, Path)), f"declaration={path!r} must be the path of a JSON file (docs/servers.md).")
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"declaration={str(path)!r} cannot be read as JSON ({exc}).") from None
    check(isinstance(data, dict), f"declaration={str(path)!r} must hold a JSON object.")
    required = {"pair", "gamma", "dialect", "target_sha256"}
    allowed = required | {"draft_sha256"}
    missing, unknown = sorted(required - set(data)), sorted(set(data) - allowed)
    check(not missing and not unknown, f"declaration={str(path)!r}: missing {missing}, unknown {unknown}; "
          f"expected the keys {sorted(allowed)}.")  # fmt: skip
    gamma = data["gamma"]
    check(
        gamma is None or (isinstance(gamma, int) and not isinstance(gamma, bool) and gamma >= 1),
        f"declaration gamma={gamma!r} must be null (no speculation) or an int >= 1.",
    )
    for key in ("pair", "dialect", "target_sha256"):
        check(isinstance(data[key], str) and data[key], f"declaration {key}={data[key]!r} must be a non-empty string.")
    return Declaration(data["pair"], gamma, data["dialect"], data["target_sha256"], data.get("draft_sha256"))
