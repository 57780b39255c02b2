"""The path :mod:`hf_icot.publishing.hub` had before 2026-12-01, kept as a thin alias so that what was printed and
written then still works: ``python -m hf_icot.hub push OUTPUT_DIR --repo ID`` (the retry command of a failed push)
and ``import hf_icot.hub`` (the very same module object as :mod:`hf_icot.publishing.hub`). New code uses the new
path; docs/public_paths.md says how a public path moves."""

from __future__ import annotations

import sys

from hf_icot.publishing import hub as _moved

if __name__ == "__main__":
    sys.exit(_moved.main())
sys.modules[__name__] = _moved
