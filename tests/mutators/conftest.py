"""Make the fixture models importable as ``models`` from the mutator tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
