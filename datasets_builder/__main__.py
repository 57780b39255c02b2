"""``python -m datasets_builder``; see :mod:`datasets_builder.cli`."""

from datasets_builder.cli import main

raise SystemExit(main())
